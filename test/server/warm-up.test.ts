/**
 * The warm-up (src/server/warm-up.ts): at start, before /_check says ready, the service evaluates in a
 * session of its own through its own code paths, as a caller whose credentials exist only meanwhile;
 * it leaves no session, no log line of its calls, no count in the metrics and no file, works when the
 * port speaks HTTPS only, and a warm-up that fails does not stop the service from starting.
 */
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { expect } from "chai";
import parsePrometheus from "parse-prometheus-text-format";
import { UserDirectory } from "../../src/auth/users.js";
import { defaults } from "../../src/config/load.js";
import { createLogger } from "../../src/server/logger.js";
import { rest } from "../support/clients.js";
import { spawnRock, untilAnswers } from "../support/rock-process.js";
import { startTestServer, USERS, type TestServer } from "../support/server.js";

const run = promisify(execFile);

interface Line {
  readonly msg: string;
  readonly user?: string;
  readonly calls?: number;
  readonly ms?: number;
}

function capture() {
  let text = "";
  return {
    destination: { write: (s: string) => void (text += s) },
    lines: (): Line[] =>
      text
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Line),
  };
}

/** The warm-up's private folders now in the temporary folder. */
function warmUpFolders(): string[] {
  return fs.readdirSync(os.tmpdir()).filter((name) => name.startsWith("rock-warm-up-"));
}

describe("The warm-up at start", function () {
  this.timeout(120_000);

  describe("its credentials (UserDirectory.grant)", () => {
    let users: UserDirectory;
    before(() => {
      users = new UserDirectory(USERS, { ...defaults().auth, maxFailures: 0 });
    });
    after(() => users.close());

    it("authenticate as the caller they name, with its roles, until revoked; any other password does not", async () => {
      const grant = users.grant("warm-up x", ["user"]);
      expect(grant.password).to.have.length.greaterThan(40);
      const caller = await users.authenticate(grant.name, grant.password);
      expect(caller?.name).to.equal("warm-up x");
      expect([...(caller?.roles ?? [])]).to.deep.equal(["user"]);
      expect(await users.authenticate(grant.name, `${grant.password}x`)).to.equal(undefined);
      grant.revoke();
      expect(await users.authenticate(grant.name, grant.password)).to.equal(undefined);
    });

    it("leave a configured user of the same name with their own password only", async () => {
      const grant = users.grant("user", ["administrator"]);
      expect([...((await users.authenticate("user", grant.password))?.roles ?? [])]).to.deep.equal(["administrator"]);
      expect([...((await users.authenticate("user", "user"))?.roles ?? [])]).to.deep.equal(["user"]);
      grant.revoke();
      expect(await users.authenticate("user", grant.password)).to.equal(undefined);
      expect((await users.authenticate("user", "user"))?.name).to.equal("user");
    });
  });

  describe("a server that warms up", () => {
    const log = capture();
    let server: TestServer;
    let foldersBefore: string[];
    before(async () => {
      foldersBefore = warmUpFolders();
      server = await startTestServer({
        r: { startOnBoot: true },
        server: { warmUpCalls: 40 },
        logger: createLogger({ level: "info", destination: log.destination }),
      });
    });
    after(async () => server?.stop());

    it("has made its calls before it answers, and says so once", () => {
      const warmed = log.lines().filter((l) => l.msg === "warmed up");
      expect(warmed).to.have.length(1);
      expect(warmed[0]?.calls).to.equal(40);
      expect(warmed[0]?.ms).to.be.a("number");
    });

    it("logs none of its calls or its session, and leaves no session and no folder", async () => {
      const own = log.lines().filter((l) => l.user?.startsWith("warm-up"));
      expect(own, JSON.stringify(own.slice(0, 3))).to.deep.equal([]);
      const sessions = await rest(server.url, "GET", "/r/sessions", { user: "admin" });
      expect(sessions.status).to.equal(200);
      expect(sessions.json<unknown[]>()).to.deep.equal([]);
      expect(warmUpFolders()).to.deep.equal(foldersBefore);
    });

    it("counts none of its calls or sessions in the metrics, which count a client's", async () => {
      const created = await rest(server.url, "POST", "/r/sessions", { user: "user" });
      expect(created.status).to.equal(201);
      const id = created.json<{ id: string }>().id;
      const evaluated = await rest(server.url, "POST", `/r/session/${id}/_eval`, {
        user: "user",
        body: "1+1",
        headers: { "content-type": "application/x-rscript" },
      });
      expect(evaluated.status).to.equal(200);
      const scraped = await rest(server.url, "GET", "/metrics", { user: "admin" });
      const families = parsePrometheus(scraped.text);
      const sum = (name: string, method?: string) =>
        (families.find((f) => f.name === name)?.metrics ?? [])
          .filter((m) => method === undefined || m.labels?.method === method)
          .reduce((n, m) => n + Number(m.value ?? 0), 0);
      // The warm-up evaluated 40 times through REST (EvalStream) and Connect (Eval) and opened a session.
      expect(sum("rock_rpc_requests_total", "EvalStream")).to.equal(1);
      expect(sum("rock_rpc_requests_total", "Eval")).to.equal(0);
      expect(sum("rock_rpc_requests_total", "CreateSession")).to.equal(1);
      expect(sum("rock_r_sessions_opened_total")).to.equal(1);
    });
  });

  it("warms up through its own door when the port speaks HTTPS only", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rock-warm-tls-"));
    const log = capture();
    let server: TestServer | undefined;
    try {
      const cert = path.join(dir, "cert.pem");
      const key = path.join(dir, "key.pem");
      await run("openssl", [
        ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1"],
        ...["-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
      ]);
      server = await startTestServer({
        r: { startOnBoot: true },
        server: { warmUpCalls: 12 },
        tls: { cert, key },
        logger: createLogger({ level: "info", destination: log.destination }),
      });
      const warmed = log.lines().filter((l) => l.msg === "warmed up" || l.msg.startsWith("warm-up failed"));
      expect(warmed.map((l) => `${l.msg} ${l.calls}`)).to.deep.equal(["warmed up 12"]);
    } finally {
      await server?.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("answers /_check 500 'warming up' until it is done, then 200", async () => {
    const rock = await spawnRock({ ROCK_R_START: "true", ROCK_WARM_UP_CALLS: "3000" });
    try {
      const seen: string[] = [];
      const end = Date.now() + 90_000;
      for (;;) {
        const answer = await fetch(`${rock.url}/_check`).then(
          async (res) => `${res.status} ${await res.text()}`,
          () => "refused",
        );
        if (seen.at(-1) !== answer) seen.push(answer);
        if (answer.startsWith("200")) break;
        if (Date.now() > end) throw new Error(`never ready: ${seen.join(" | ")}`);
        await new Promise((r) => setTimeout(r, 25));
      }
      expect(
        seen.some((a) => a.startsWith("500") && a.includes("warming up")),
        seen.join(" | "),
      ).to.equal(true);
      expect(rock.log()).to.include('"warmed up"');
    } finally {
      await rock.kill();
    }
  });

  it("starts anyway, saying why, when the warm-up fails", async () => {
    // A temporary "folder" that is a file: the warm-up's private folder cannot be made. The compiled
    // program: tsx would make its cache folder there first.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rock-warm-fail-"));
    const file = path.join(dir, "a-file");
    fs.writeFileSync(file, "");
    const rock = await spawnRock({ ROCK_R_START: "true", ROCK_WARM_UP_CALLS: "10", TMPDIR: file }, { compiled: true });
    try {
      await untilAnswers(rock.url, "/_check", 200, 60_000);
      expect(rock.log()).to.include("warm-up failed; serving anyway");
      expect(rock.log()).to.not.include('"warmed up"');
    } finally {
      await rock.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
