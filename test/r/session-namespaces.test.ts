import { expect } from "chai";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { hasCapability, SYS_ADMIN } from "../../src/r/confine/capabilities.js";
import { defaults } from "../../src/config/load.js";
import { rest } from "../support/clients.js";
import { startTestServer, type TestServer } from "../support/server.js";

const RSCRIPT = { "content-type": "application/x-rscript", accept: "application/json" };
const admin = { user: "admin", password: "admin" };

async function open(server: TestServer): Promise<string> {
  const created = await rest(server.url, "POST", "/r/sessions", admin);
  expect(created.status, created.text).to.equal(201);
  return created.json<{ id: string }>().id;
}
const evaluate = async (server: TestServer, id: string, code: string): Promise<unknown> => {
  const answer = await rest(server.url, "POST", `/r/session/${id}/_eval`, { ...admin, headers: RSCRIPT, body: code });
  expect(answer.status, answer.text).to.equal(200);
  return answer.json();
};

describe("what a session sees: its own root, /tmp, /var/tmp, /dev/shm and network (as root)", function () {
  this.timeout(60_000);
  let hostFile: string;
  before(function () {
    const why = process.getuid?.() !== 0 ? "not root" : !hasCapability(SYS_ADMIN) ? "no CAP_SYS_ADMIN" : undefined;
    if (why) {
      console.log(`      skipped: ${why}`);
      this.skip();
    }
    hostFile = mkdtempSync(join(tmpdir(), "rock-host-visible-"));
    writeFileSync(join(hostFile, "x"), "host");
  });
  after(() => hostFile && rmSync(hostFile, { recursive: true, force: true }));

  describe("private (the default)", () => {
    let server: TestServer;
    before(async () => {
      // One session uid: the next session runs as the uid of the one before.
      const uid = 100_000 + Math.floor(Math.random() * 40_000) * 100;
      server = await startTestServer({ r: { startOnBoot: true, spareSessions: 0, sessionUids: { first: uid, last: uid } } });
    });
    after(() => server?.stop());

    it("hides the host's temporary files; the session's own folders and tempdir() work (its folder lies under /tmp here)", async () => {
      const id = await open(server);
      try {
        expect(await evaluate(server, id, `file.exists('${hostFile}/x')`)).to.equal(false);
        // All /tmp holds: the way to the session's folder, and to the setup library when the checkout is there.
        const kept = `c(strsplit(dirname(getwd()), '/')[[1]], strsplit('${defaults().r.setupLibrary}', '/')[[1]])`;
        expect(await evaluate(server, id, `length(setdiff(list.files('/tmp', all.files = TRUE, no.. = TRUE), ${kept}))`)).to.equal(0);
        expect(
          await evaluate(server, id, "f <- tempfile(); writeLines('t', f); c(startsWith(f, dirname(getwd())), readLines(f))"),
        ).to.deep.equal(["TRUE", "t"]);
        expect(await evaluate(server, id, "writeLines('w', 'here.txt'); readLines('here.txt')")).to.equal("w");
        expect(basename(server.dataDir)).to.match(/^rock-test-/);
      } finally {
        await rest(server.url, "DELETE", `/r/session/${id}`, admin);
      }
    });

    it("makes what a session left in /tmp, /var/tmp and /dev/shm invisible to the next session on the same uid", async () => {
      await rest(server.url, "DELETE", "/r/sessions", admin);
      const first = await open(server);
      const uid = await evaluate(server, first, "unix::getuid()");
      await evaluate(server, first, "for (d in c('/tmp', '/var/tmp', '/dev/shm')) writeLines('secret', file.path(d, 'left-behind')); TRUE");
      expect(await evaluate(server, first, "all(file.exists(file.path(c('/tmp', '/var/tmp', '/dev/shm'), 'left-behind')))")).to.equal(true);
      await rest(server.url, "DELETE", `/r/session/${first}`, admin);
      const next = await open(server);
      expect(await evaluate(server, next, "unix::getuid()"), "the same uid").to.equal(uid);
      expect(await evaluate(server, next, "any(file.exists(file.path(c('/tmp', '/var/tmp', '/dev/shm'), 'left-behind')))")).to.equal(false);
    });
  });

  describe("with the setup library under /tmp (a checkout there, as CI may have it)", () => {
    let server: TestServer;
    let library: string;
    before(async () => {
      library = mkdtempSync(join(tmpdir(), "rock-setup-library-"));
      // The library itself, should the checkout's r-library be a link to it.
      cpSync(realpathSync(defaults().r.setupLibrary), library, { recursive: true });
      server = await startTestServer({ r: { startOnBoot: true, spareSessions: 0, setupLibrary: library } });
    });
    after(async () => {
      await server?.stop();
      rmSync(library, { recursive: true, force: true });
    });

    it("keeps it reachable in the session: R loads package code from it lazily, after the tmpfs covers /tmp", async () => {
      const id = await open(server);
      expect(await evaluate(server, id, `dir.exists('${library}')`)).to.equal(true);
      expect(await evaluate(server, id, "unix::getuid() > 0")).to.equal(true);
    });
  });

  describe("shared (r.sessionTmp: shared)", () => {
    let server: TestServer;
    before(async () => (server = await startTestServer({ r: { startOnBoot: true, spareSessions: 0, sessionTmp: "shared" } })));
    after(() => server?.stop());

    it("shows the host's /tmp, as before", async () => {
      const id = await open(server);
      expect(await evaluate(server, id, `dir.exists('${hostFile}')`)).to.equal(true);
    });
  });

  describe("r.sessionFilesystem", () => {
    let minimal: TestServer;
    let host: TestServer;
    let minimalId: string;
    let hostId: string;
    before(async () => {
      [minimal, host] = await Promise.all([
        startTestServer({ r: { startOnBoot: true, spareSessions: 0 } }),
        startTestServer({ r: { startOnBoot: true, spareSessions: 0, sessionFilesystem: "host" } }),
      ]);
      [minimalId, hostId] = await Promise.all([open(minimal), open(host)]);
    });
    after(async () => {
      await minimal?.stop();
      await host?.stop();
    });

    it("minimal (the default): /etc/passwd names only root and the session; host: the host's", async () => {
      const hostUsers = readFileSync("/etc/passwd", "utf8")
        .trim()
        .split("\n")
        .map((line) => line.split(":")[0]);
      expect(hostUsers.length, "this host's passwd has more users than root").to.be.greaterThan(2);
      expect(await evaluate(minimal, minimalId, "sapply(strsplit(readLines('/etc/passwd'), ':'), `[`, 1)")).to.deep.equal([
        "root",
        "session",
      ]);
      expect(await evaluate(minimal, minimalId, "Sys.info()[['user']]")).to.equal("session");
      expect(await evaluate(host, hostId, "sapply(strsplit(readLines('/etc/passwd'), ':'), `[`, 1)")).to.deep.equal(hostUsers);
    });

    it("minimal: /etc/shadow, /var/lib, what /home and /opt hold and the service's processes are out of sight; host: in sight", async () => {
      const probe = `c(file.exists('/etc/shadow'), dir.exists('/var/lib'), length(list.files('/home')) > 0, length(list.files('/opt')) > 0, file.exists('/proc/${process.pid}'))`;
      const hostView = [
        existsSync("/etc/shadow"),
        existsSync("/var/lib"),
        readdirSync("/home").length > 0,
        readdirSync("/opt").length > 0,
        true,
      ];
      expect(await evaluate(host, hostId, probe), "as the host has them").to.deep.equal(hostView);
      expect(await evaluate(minimal, minimalId, probe)).to.deep.equal([false, false, false, false, false]);
      // The session's own processes stay visible to it (hidepid hides other uids' only).
      expect(await evaluate(minimal, minimalId, "file.exists(file.path('/proc', Sys.getpid()))")).to.equal(true);
    });

    it("minimal: R and what it runs keep working — packages, programs, time zone, TLS certificates, forks, its folders", async () => {
      const checks = [
        "system('echo hi', intern = TRUE) == 'hi'",
        "nzchar(format(Sys.time(), '%Z'))",
        `file.exists('/etc/ssl/certs/ca-certificates.crt') == ${readableCertificates() ? "TRUE" : "FALSE"}`,
        "identical(unlist(parallel::mclapply(1:2, function(i) i * 2, mc.cores = 2)), c(2, 4))",
        "jsonlite::toJSON(1:2) == '[1,2]'",
        "requireNamespace('unix', quietly = TRUE)",
        "length(capture.output(sessionInfo())) > 5",
        "{ f <- tempfile(); writeLines('t', f); readLines(f) == 't' }",
        "{ writeLines('w', 'mine.txt'); readLines('mine.txt') == 'w' }",
        "!suppressWarnings(file.create('/usr/x')) && !suppressWarnings(file.create('/x'))",
      ];
      const answers = await evaluate(minimal, minimalId, `c(${checks.join(", ")})`);
      expect(answers, checks.join("\n")).to.deep.equal(checks.map(() => true));
    });
  });

  describe("a session whose confinement fails", () => {
    let server: TestServer;
    let folder: string;
    before(async () => {
      folder = mkdtempSync(join(tmpdir(), "rock-confine-fails-"));
      // Administrator code in the R server that breaks what each fork calls to make its view.
      const profile = join(folder, "profile.R");
      writeFileSync(
        profile,
        'local({ ns <- asNamespace("rocksandbox"); unlockBinding("minimal_root", ns); assign("minimal_root", function(...) stop("no view today"), envir = ns) })\n',
        { mode: 0o644 },
      );
      server = await startTestServer({ r: { startOnBoot: true, spareSessions: 0, profile } });
    });
    after(async () => {
      await server?.stop();
      rmSync(folder, { recursive: true, force: true });
    });

    it("is refused at once, saying so, never served unconfined; the R server's log says why", async () => {
      const t = performance.now();
      const created = await rest(server.url, "POST", "/r/sessions", admin);
      const took = performance.now() - t;
      expect(created.status, created.text).to.equal(500);
      expect(created.json<{ message: string }>().message).to.match(/^R session could not start: it ended before it served/);
      expect(took, "said when the session ended, not at the 15 s timeout").to.be.lessThan(5000);
      const log = await rest(server.url, "GET", "/rserver/_log", admin);
      expect(log.text).to.include("R session not confined, so not started: no view today");
      expect((await rest(server.url, "GET", "/r/sessions", admin)).json<unknown[]>()).to.deep.equal([]);
    });
  });

  describe("r.sessionNetwork", () => {
    let none: TestServer;
    let host: TestServer;
    before(async () => {
      none = await startTestServer({ r: { startOnBoot: true, spareSessions: 0, sessionNetwork: "none" } });
      host = await startTestServer({ r: { startOnBoot: true, spareSessions: 0 } });
    });
    after(async () => {
      await none?.stop();
      await host?.stop();
    });

    // The other server's /_info, on the host's loopback: a connection any session could try.
    const fetchInfo = (port: number) =>
      `tryCatch(paste(readLines(url('http://127.0.0.1:${port}/_info'), warn = FALSE), collapse = ''), error = function(e) 'refused')`;

    it("none: a session reaches nothing but its own loopback, and still serves its calls", async () => {
      const id = await open(none);
      expect(await evaluate(none, id, fetchInfo(host.port))).to.equal("refused");
      expect(await evaluate(none, id, "length(readLines('/proc/net/dev'))")).to.equal(3); // two header lines, lo
      expect(await evaluate(none, id, "sum(1:10)")).to.equal(55);
    });

    it("host (the default): the same connection works", async () => {
      const id = await open(host);
      expect(await evaluate(host, id, fetchInfo(none.port))).to.match(/"type":"rock"/);
    });
  });
});

function readableCertificates(): boolean {
  try {
    readFileSync("/etc/ssl/certs/ca-certificates.crt");
    return true;
  } catch {
    return false;
  }
}
