/**
 * A user ends a busy session of theirs from another of their sessions, as Armadillo does (its r
 * module's ProcessServiceImpl: `ps::ps_pid(ps::ps_handle())` in the session when it opens it, then, to
 * clean up one stuck in an evaluation, `ps::ps_terminate(ps::ps_handle(<pid>L))` in a new session of
 * the same account, then DELETE of the old one), through REST on a whole server whose sessions run as
 * uids of their own; never another account's session, nor any process that is not a session's.
 */
import { expect } from "chai";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hasCapability, SYS_ADMIN } from "../../src/r/confine/capabilities.js";
import { ConsoleLog } from "../../src/r/process/console-log.js";
import { REngine } from "../../src/r/engine/engine.js";
import { rest, type RestAnswer } from "../support/clients.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { alive, rConfig, sleep, startRig, until } from "./support.js";

const RSCRIPT = { "content-type": "application/x-rscript", accept: "application/json" };

const as = (user: string): { user: string; password: string } => ({ user, password: user });

async function open(server: TestServer, user: string): Promise<string> {
  const created = await rest(server.url, "POST", "/r/sessions", as(user));
  expect(created.status, created.text).to.equal(201);
  return created.json<{ id: string }>().id;
}

function evaluate(server: TestServer, user: string, id: string, code: string): Promise<RestAnswer> {
  return rest(server.url, "POST", `/r/session/${id}/_eval`, { ...as(user), headers: RSCRIPT, body: code });
}

async function value(server: TestServer, user: string, id: string, code: string): Promise<unknown> {
  const answer = await evaluate(server, user, id, code);
  expect(answer.status, answer.text).to.equal(200);
  return answer.json();
}

/** The R error an evaluation answered with (400). */
async function refusal(server: TestServer, user: string, id: string, code: string): Promise<string> {
  const answer = await evaluate(server, user, id, code);
  expect(answer.status, answer.text).to.equal(400);
  return answer.json<{ message: string }>().message;
}

/** Starts `code` in session `id`; resolves once R runs it, with its answer to come. */
async function busy(server: TestServer, user: string, id: string, code: string): Promise<{ answer: Promise<RestAnswer> }> {
  const answer = evaluate(server, user, id, code);
  answer.catch(() => undefined);
  await until(async () => (await rest(server.url, "GET", `/r/session/${id}`, as(user))).json<{ busy: boolean }>().busy);
  return { answer };
}

/** The pid of the R server: the child of this process that runs worker.R. */
function rServerPid(): number {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid && readFileSync(`/proc/${entry}/cmdline`, "utf8").includes("worker.R")) return Number(entry);
    } catch {
      // Gone meanwhile.
    }
  }
  throw new Error("no R server among this process's children");
}

/** A pid no process has. */
function freePid(): number {
  for (let pid = 4_000_000; ; pid--) if (!alive(pid)) return pid;
}

// The minimal file system (the default) gives each session a /proc of its own that lists its own
// processes only; with the host's, a session sees every process but may signal only its own.
for (const filesystem of ["minimal", "host"] as const) {
  describe(`ending a busy session from another session of its owner (as root, r.sessionFilesystem ${filesystem})`, function () {
    this.timeout(60_000);
    let server: TestServer;

    before(async function () {
      const why =
        process.getuid?.() !== 0 ? "not root" : filesystem === "minimal" && !hasCapability(SYS_ADMIN) ? "no CAP_SYS_ADMIN" : undefined;
      if (why) {
        console.log(`      skipped: ${why}`);
        this.skip();
      }
      server = await startTestServer({ r: { startOnBoot: true, spareSessions: 2, sessionFilesystem: filesystem } });
    });
    after(() => server?.stop());

    it("does what Armadillo does: the new session's eval answers 200, the busy eval fails at once, the old session's DELETE answers 204", async () => {
      const old = await open(server, "user");
      const pid = (await value(server, "user", old, "ps::ps_pid(ps::ps_handle())")) as number;
      const { answer } = await busy(server, "user", old, "Sys.sleep(600)");
      const cleaner = await open(server, "user");
      const started = Date.now();
      expect(await value(server, "user", cleaner, `ps::ps_terminate(ps::ps_handle(${pid}L))`)).to.equal(null);
      const ended = await answer;
      expect(Date.now() - started, "the busy eval's end").to.be.below(5_000);
      expect([ended.status, ended.json<{ message: string }>().message]).to.deep.equal([500, "R session has ended"]);
      await until(() => !alive(pid));
      expect((await rest(server.url, "DELETE", `/r/session/${old}`, as("user"))).status).to.equal(204);
      // Deleted: gone, as any session is.
      expect((await rest(server.url, "DELETE", `/r/session/${old}`, as("user"))).status).to.equal(404);
      expect((await rest(server.url, "DELETE", `/r/session/${cleaner}`, as("user"))).status).to.equal(204);
    });

    it("ends one that never checks for interrupts with ps::ps_kill or tools::pskill, and interrupts one with ps::ps_interrupt", async () => {
      for (const kill of ["ps::ps_kill(ps::ps_handle(PIDL))", "tools::pskill(PID, tools::SIGKILL)"]) {
        const old = await open(server, "user");
        const pid = (await value(server, "user", old, "Sys.getpid()")) as number;
        const { answer } = await busy(server, "user", old, "repeat {}");
        const cleaner = await open(server, "user");
        const killed = await value(server, "user", cleaner, kill.replaceAll("PID", String(pid)));
        expect(killed, kill).to.equal(kill.startsWith("tools") ? true : null);
        expect((await answer).status, kill).to.equal(500);
        expect((await rest(server.url, "DELETE", `/r/session/${old}`, as("user"))).status, kill).to.equal(204);
        await rest(server.url, "DELETE", `/r/session/${cleaner}`, as("user"));
      }
      const old = await open(server, "user");
      await value(server, "user", old, "kept <- 42");
      const pid = (await value(server, "user", old, "Sys.getpid()")) as number;
      const { answer } = await busy(server, "user", old, "Sys.sleep(600)");
      const other = await open(server, "user");
      expect(await value(server, "user", other, `ps::ps_interrupt(ps::ps_handle(${pid}L))`)).to.equal(null);
      const interrupted = await answer;
      expect([interrupted.status, interrupted.json<{ message: string }>().message]).to.deep.equal([400, "Error: evaluation interrupted"]);
      expect(await value(server, "user", old, "kept")).to.equal(42);
      await rest(server.url, "DELETE", "/r/sessions", as("admin"));
    });

    it("ends what a session of the owner started too, the session living on", async () => {
      const owner = await open(server, "user");
      const child = (await value(server, "user", owner, "parallel::mcparallel(Sys.sleep(600))$pid")) as number;
      const other = await open(server, "user");
      expect(await value(server, "user", other, `tools::pskill(${child})`)).to.equal(true);
      await until(async () => (await value(server, "user", owner, `is.null(parallel::mccollect(wait = FALSE))`)) === false);
      expect(await value(server, "user", owner, "1 + 1")).to.equal(2);
      await rest(server.url, "DELETE", "/r/sessions", as("admin"));
    });

    it("never reaches another account's session: ps fails as for any process the session may not signal, and it runs on", async () => {
      const victim = await open(server, "user2");
      const pid = (await value(server, "user2", victim, "Sys.getpid()")) as number;
      const { answer } = await busy(server, "user2", victim, "Sys.sleep(600)");
      // A process of another uid that is no session's.
      const foreign = spawn("sleep", ["600"], { uid: 65534, gid: 65534, stdio: "ignore" });
      try {
        const free = freePid();
        const attacks = [
          (target: number) => `ps::ps_terminate(ps::ps_handle(${target}L))`,
          (target: number) => `ps::ps_kill(ps::ps_handle(${target}L))`,
          (target: number) => `ps::ps_interrupt(ps::ps_handle(${target}L))`,
          (target: number) => `ps::ps_send_signal(ps::ps_handle(${target}L), ps::signals()$SIGTERM)`,
        ];
        // ps keeps its last error in the process and may say it again: each try in a session of its own.
        const attempt = async (code: string, target: number): Promise<string> => {
          const attacker = await open(server, "user");
          try {
            return (await refusal(server, "user", attacker, code)).replaceAll(String(target), "PID");
          } finally {
            await rest(server.url, "DELETE", `/r/session/${attacker}`, as("user"));
          }
        };
        for (const attack of attacks) {
          const refused = await attempt(attack(pid), pid);
          expect(refused, attack(pid)).to.equal(await attempt(attack(foreign.pid!), foreign.pid!));
          // Its /proc lists none of them: the same as for a pid no process has.
          if (filesystem === "minimal") expect(refused, attack(pid)).to.equal(await attempt(attack(free), free));
        }
        const attacker = await open(server, "user");
        expect(await value(server, "user", attacker, `tools::pskill(${pid}, tools::SIGKILL)`)).to.equal(false);
        // A handle made with a start time of its own is refused too.
        await refusal(server, "user", attacker, `ps::ps_kill(ps::ps_handle(${pid}L, time = Sys.time()))`);
        expect(alive(pid)).to.equal(true);
        expect((await rest(server.url, "GET", `/r/session/${victim}`, as("user2"))).json<{ busy: boolean }>().busy).to.equal(true);
        expect((await rest(server.url, "POST", `/r/session/${victim}/_interrupt`, as("user2"))).status).to.be.within(200, 299);
        expect((await answer).status).to.equal(400);
        expect(await value(server, "user2", victim, "1 + 1")).to.equal(2);
      } finally {
        foreign.kill("SIGKILL");
        await rest(server.url, "DELETE", "/r/sessions", as("admin"));
      }
    });

    it("keeps the protocol when an interrupt lands while R waits for the service's answer", async () => {
      const target = await open(server, "user");
      const pid = (await value(server, "user", target, "Sys.getpid()")) as number;
      const asker = await open(server, "user");
      // Each turn asks the service: an interrupt of the loop lands in that wait often.
      for (let turn = 0; turn < 20; turn++) {
        const { answer } = await busy(server, "user", asker, `repeat tools::pskill(${pid}, tools::SIGINT)`);
        await sleep(Math.random() * 20);
        expect((await rest(server.url, "POST", `/r/session/${asker}/_interrupt`, as("user"))).status).to.be.within(200, 299);
        const interrupted = await answer;
        expect([interrupted.status, interrupted.json<{ message: string }>().message]).to.deep.equal([400, "Error: evaluation interrupted"]);
        expect(await value(server, "user", asker, `${turn} + 1`)).to.equal(turn + 1);
      }
      expect(await value(server, "user", target, "1 + 1")).to.equal(2);
      await rest(server.url, "DELETE", "/r/sessions", as("admin"));
    });

    it("refuses a pid that is no session's: 1, the service's, the R server's", async () => {
      const session = await open(server, "user");
      const targets = [1, process.pid, rServerPid()];
      for (const target of targets) {
        expect(await refusal(server, "user", session, `ps::ps_terminate(ps::ps_handle(${target}L))`), String(target)).to.match(/./);
      }
      expect(await value(server, "user", session, `tools::pskill(c(${targets.join(", ")}), tools::SIGTERM)`)).to.deep.equal([
        false,
        false,
        false,
      ]);
      for (const target of targets) expect(alive(target), String(target)).to.equal(true);
      await rest(server.url, "DELETE", `/r/session/${session}`, as("user"));
    });
  });
}

describe("signals to peers, outside what the R side asks", function () {
  this.timeout(60_000);

  it("ends a session that asks a second time before its answer came, which R never does", async function () {
    if (process.getuid?.() !== 0) {
      console.log("      skipped: not root");
      this.skip();
    }
    const rig = await startRig();
    try {
      const session = await rig.engine.createSession("alice");
      // Two signal frames written at once on the session's main socket (the one connection it reads and writes).
      const twice = [
        "main <- Filter(function(i) { s <- summary(getConnection(i)); s$class == 'sockconn' && s$mode == 'r+b' }, getAllConnections())",
        "payload <- writeBin(c('1', 'none', ''), raw())",
        "frame <- c(charToRaw('k'), as.raw(c(0, 0, 0, length(payload))), payload)",
        "writeBin(c(frame, frame), getConnection(main[[1]]))",
        "Sys.sleep(30)",
      ].join("; ");
      const error = await session.eval(Buffer.from(twice), "json").then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error?.message).to.equal("R session has ended");
      expect(session.closed).to.equal(true);
    } finally {
      await rig.close();
    }
  });
});

describe("sessions that are not isolated (all run as the service's user)", function () {
  this.timeout(60_000);

  it("signal each other themselves, the wrappers out of the way; one ended so is still deleted once", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "rock-r-test-"));
    const config = rConfig();
    const log = new ConsoleLog({ file: join(dataDir, "rserver.log"), maxBytes: config.logMaxBytes, files: config.logFiles });
    const engine = new REngine({ config, dataDir, sessionsDir: join(dataDir, "sessions"), isolated: false, log });
    try {
      await engine.boot();
      const old = await engine.createSession("alice");
      const pid = Number(await old.eval(Buffer.from("ps::ps_pid(ps::ps_handle())"), "json"));
      const running = old.eval(Buffer.from("Sys.sleep(600)"), "json").then(
        () => undefined,
        (e: Error) => e,
      );
      await until(() => old.busy);
      const cleaner = await engine.createSession("alice");
      expect(String(await cleaner.eval(Buffer.from(`ps::ps_terminate(ps::ps_handle(${pid}L))`), "json"))).to.equal("null");
      expect((await running)?.message).to.equal("R session has ended");
      const owners: string[] = [];
      await engine.deleteSession(old.id, (owner) => owners.push(owner));
      expect(owners).to.deep.equal(["alice"]);
      expect(() => engine.session(old.id)).to.throw(/No such R session/);
      const again = await engine
        .deleteSession(old.id, () => undefined)
        .then(
          () => undefined,
          (e: Error) => e,
        );
      expect(again?.message).to.match(/No such R session/);
    } finally {
      await engine.close();
      log.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
