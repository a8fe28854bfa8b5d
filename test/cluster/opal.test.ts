import { expect } from "chai";
import { createServer, type Server, type Socket } from "node:net";
import { FakeOpal, until } from "./fake-opal.js";
import { spawnRock, untilAnswers, type RockProcess } from "../support/rock-process.js";

const TOKEN = "opal-app-token";
const admin = { authorization: `Basic ${Buffer.from("admin:admin").toString("base64")}` };

/** The node's environment to join `opal` as node `id`. */
function joining(opal: string, extra: Record<string, string> = {}) {
  return (port: number) => ({
    ROCK_ID: "rock-a",
    ROCK_CLUSTER: "lab",
    ROCK_TAGS: "x, y",
    ROCK_SERVER: `http://127.0.0.1:${port}`,
    ROCK_OPAL_SERVER: opal,
    ROCK_OPAL_TOKEN: TOKEN,
    ROCK_R_SPARE_SESSIONS: "0",
    ...extra,
  });
}

async function metric(server: RockProcess, outcome: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`, { headers: admin })).text();
  const line = text.split("\n").find((l) => l.startsWith(`rock_opal_registrations_total{outcome="${outcome}"}`));
  return line === undefined ? 0 : Number(line.split(" ").pop());
}

/** Log lines (JSON) whose message matches. */
function logged(server: RockProcess, msg: RegExp): Array<Record<string, unknown>> {
  return server
    .log()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => msg.test(String(l.msg)));
}

describe("cluster: a node registers itself with Opal", function () {
  this.timeout(60_000);
  let opal: FakeOpal;
  let server: RockProcess | undefined;

  beforeEach(async () => (opal = await FakeOpal.start(TOKEN, { name: "admin", password: "admin" })));
  afterEach(async () => {
    await server?.kill();
    server = undefined;
    await opal.close();
  });

  it("registers within 15 s of start, once Opal's call-back (GET, then PUT /rserver, as a manager) succeeded", async () => {
    const started = Date.now();
    server = await spawnRock(joining(opal.url));
    await until(() => opal.apps.size === 1, 15_000, "the node is registered");
    expect(Date.now() - started).to.be.lessThan(15_000);
    expect([...opal.apps.values()]).to.deep.equal([{ name: "rock-a", type: "rock", cluster: "lab", tags: ["x", "y"], server: server.url }]);
    expect(opal.callbacks).to.deep.equal(["GET 200", "PUT 200"]);
    expect(opal.posts()[0]!.token).to.equal(TOKEN);
    // The node logs it once Opal's answer is back, after Opal counted the node.
    await until(() => logged(server!, /^registered with Opal$/).length > 0, 5_000, "the registration logged");
    expect(logged(server, /^registered with Opal$/)).to.have.length(1);
    expect(await metric(server, "registered")).to.be.at.least(1);
  });

  it("registers again after Opal restarted and forgot it (opal.refreshSeconds), a repeated POST keeping one entry", async () => {
    server = await spawnRock(joining(opal.url, { ROCK_OPAL_REFRESH_SECONDS: "1" }));
    await until(() => opal.apps.size === 1, 15_000, "registered");
    await until(() => opal.posts().length >= 2, 5_000, "a second POST while still known");
    expect(opal.apps.size).to.equal(1);
    opal.forget();
    await until(() => opal.apps.size === 1, 5_000, "registered again");
    await until(() => logged(server!, /^registered with Opal again$/).length > 0, 5_000, "the registration logged");
  });

  it("logs a wrong token (401, what it means) and keeps trying", async () => {
    server = await spawnRock(joining(opal.url, { ROCK_OPAL_TOKEN: "wrong-token-5f3a", ROCK_OPAL_RETRY_SECONDS: "1" }));
    await until(() => opal.posts().length >= 2, 15_000, "two attempts");
    expect(opal.apps.size).to.equal(0);
    const refusals = logged(server, /Opal refused the registration \(401\): a wrong ROCK_OPAL_TOKEN/);
    expect(refusals.length).to.be.at.least(1);
    expect(refusals[0]).to.include({ status: 401, answer: "Invalid application token", level: "warn" });
    expect(server.log()).to.not.include("wrong-token-5f3a");
    expect(await metric(server, "refused")).to.be.at.least(2);
  });

  it("on SIGTERM, once R stopped, asks Opal to take the node off (DELETE with the same body) and exits 0", async () => {
    server = await spawnRock(joining(opal.url));
    await until(() => opal.apps.size === 1, 15_000, "registered");
    process.kill(server.pid, "SIGTERM");
    const exit = await server.exited;
    expect(exit.code).to.equal(0);
    expect(opal.apps.size).to.equal(0);
    const deleted = opal.seen.filter((s) => s.method === "DELETE");
    expect(deleted).to.have.length(1);
    expect(JSON.parse(deleted[0]!.body)).to.deep.equal(JSON.parse(opal.posts()[0]!.body));
    const lines = server.log().split("\n");
    const stopped = lines.findIndex((l) => l.includes('"msg":"R server stopped"'));
    const unregistered = lines.findIndex((l) => l.includes('"msg":"unregistered from Opal"'));
    expect(stopped, "R stopped").to.be.greaterThan(-1);
    expect(unregistered, "unregistered after R stopped").to.be.greaterThan(stopped);
  });

  it("reads at most 500 characters of a refusal, however large the answer", async () => {
    const { createServer } = await import("node:http");
    let sent = 0;
    const huge = createServer((req, res) => {
      req.resume();
      res.writeHead(500, { "content-type": "text/plain" });
      // 64 MiB offered, a chunk at a time as the client reads.
      const chunk = Buffer.alloc(1 << 20, "x");
      const more = (): void => {
        while (sent < 64 && res.write(chunk)) sent++;
        if (sent >= 64) res.end();
      };
      res.on("drain", () => {
        sent++;
        more();
      });
      res.on("close", () => undefined);
      more();
    });
    await new Promise<void>((resolve) => huge.listen(0, "127.0.0.1", resolve));
    try {
      server = await spawnRock(joining(`http://127.0.0.1:${(huge.address() as { port: number }).port}`, { ROCK_OPAL_RETRY_SECONDS: "60" }));
      await until(() => logged(server!, /Opal refused the registration \(500\)/).length > 0, 15_000, "the refusal logged");
      const refusal = logged(server, /Opal refused the registration \(500\)/)[0]!;
      expect(String(refusal.answer)).to.have.length(500);
      expect(sent, "MiB the fake Opal got to send").to.be.lessThan(64);
    } finally {
      huge.closeAllConnections();
      huge.close();
    }
  });

  describe("with an Opal that never answers", () => {
    let silent: Server;
    const sockets = new Set<Socket>();
    before(async () => {
      silent = createServer((s) => {
        sockets.add(s);
        s.on("error", () => undefined);
      });
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    });
    after(() => {
      for (const s of sockets) s.destroy();
      silent.close();
    });

    it("starts, answers calls and stops as fast as without Opal", async () => {
      const { port } = silent.address() as { port: number };
      const started = Date.now();
      server = await spawnRock(joining(`http://127.0.0.1:${port}`));
      await untilAnswers(server.url, "/_check", 200, 20_000);
      const startMs = Date.now() - started;
      await until(() => sockets.size >= 1, 10_000, "the registration attempt reached the silent Opal");
      const t = Date.now();
      const created = await fetch(`${server.url}/r/sessions`, { method: "POST", headers: admin });
      expect(created.status).to.equal(201);
      const callMs = Date.now() - t;
      const stopAt = Date.now();
      process.kill(server.pid, "SIGTERM");
      const exit = await server.exited;
      expect(exit.code).to.equal(0);
      // No drain to wait for, no registration to undo: the stop must not wait for Opal.
      expect(exit.at - stopAt, "stop").to.be.lessThan(5_000);
      expect(startMs, "start").to.be.lessThan(15_000);
      expect(callMs, "a session").to.be.lessThan(2_000);
    });
  });
});

describe("cluster: a compose file written for Rock's container", function () {
  this.timeout(60_000);
  let server: RockProcess | undefined;
  afterEach(async () => {
    await server?.kill();
    server = undefined;
  });

  it("starts this server unchanged, every variable of Rock's container set, and says what it does instead of Consul and ROCK_HOME", async () => {
    const opal = await FakeOpal.start(TOKEN, { name: "keeper", password: "keeper-pw" });
    try {
      server = await spawnRock((port) => ({
        ROCK_USERS: "",
        ROCK_ADMINISTRATOR_NAME: "boss",
        ROCK_ADMINISTRATOR_PASSWORD: "boss-pw",
        ROCK_MANAGER_NAME: "keeper",
        ROCK_MANAGER_PASSWORD: "keeper-pw",
        ROCK_USER_NAME: "analyst",
        ROCK_USER_PASSWORD: "analyst-pw",
        ROCK_ID: "rock-compose",
        ROCK_CLUSTER: "default",
        ROCK_TAGS: "",
        ROCK_SERVER: `http://127.0.0.1:${port}`,
        ROCK_OPAL_SERVER: opal.url,
        ROCK_OPAL_TOKEN: TOKEN,
        ROCK_CONSUL_SERVER: "http://consul:8500",
        ROCK_CONSUL_TOKEN: "consul-token",
        ROCK_SECURITY_ENABLED: "true",
        ROCK_REPOS: "https://cloud.r-project.org",
        ROCK_HOME: "/srv",
      }));
      await untilAnswers(server.url, "/_check", 200, 30_000);
      await until(() => opal.apps.size === 1, 15_000, "registered with the manager of ROCK_MANAGER_*");
      const info = (await (await fetch(`${server.url}/_info`)).json()) as { id: string; server: string };
      expect(info).to.include({ id: "rock-compose", server: server.url });
      const warnings = logged(server, /./)
        .filter((l) => l.level === "warn")
        .map((l) => String(l.msg));
      expect(
        warnings.some((w) => w.startsWith("ROCK_CONSUL_SERVER, ROCK_CONSUL_TOKEN: Consul registration (Rock 1.x) is not done")),
      ).to.equal(true);
      // spawnRock sets ROCK_DATA_DIR, which wins over ROCK_HOME.
      expect(warnings.some((w) => w.startsWith("ROCK_HOME (/srv) is not used"))).to.equal(true);
      expect(server.log()).to.not.include("consul-token");
    } finally {
      await opal.close();
    }
  });
});
