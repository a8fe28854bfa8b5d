import { expect } from "chai";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { RConfig, UidRange } from "../../src/config/config.js";
import { defaults } from "../../src/config/load.js";
import { startRock } from "../../src/compose.js";
import { decideIsolation } from "../../src/r/confine/isolation.js";
import { proofFile } from "../../src/r/process/proof.js";
import { PROOF_FILE } from "../../src/r/wire/protocol-table.js";
import { liveProcessesByUid } from "../../src/r/confine/processes.js";
import { type QuotaSettings, SessionQuotas } from "../../src/r/confine/quotas.js";
import type { RSession } from "../../src/r/session/session.js";
import { openTestLog } from "../support/logs.js";
import { testLogger } from "../support/server.js";
import { testSessionUids } from "../support/uids.js";
import { alive, startRig, until, type Rig } from "./support.js";

const json = async (session: RSession, code: string): Promise<unknown> =>
  JSON.parse((await session.eval(Buffer.from(code), "json")).toString("utf8"));

/** What R says when it tries `code`: its value, or the text of its error or warning. */
const attempt = (code: string): string =>
  `tryCatch({ ${code} }, error = function(e) paste("refused:", conditionMessage(e)), warning = function(w) paste("refused:", conditionMessage(w)))`;

/** Quotas of the engine of `uids` that only group a session's processes (no limit). */
function quotaSettings({ first, last }: UidRange): QuotaSettings {
  return { name: `${first}-${last}`, sessionMemoryMb: 0, sessionsMemoryMb: 0, sessionCpuCores: 0, sessionProcesses: 0 };
}

/** Sessions can be given uids of their own only by root (CI runs as root). */
function rootOnly(this: Mocha.Context): void {
  if (process.getuid?.() !== 0) this.skip();
}

describe("R sessions are confined (service running as root)", function () {
  this.timeout(60_000);
  before(rootOnly);

  describe("identity and what a session can read", () => {
    let rig: Rig;
    let a: RSession;
    let b: RSession;
    const SECRET = "ROCK_TEST_SECRET_FOR_ISOLATION";
    before(async () => {
      process.env[SECRET] = "s3cret";
      try {
        rig = await startRig();
      } finally {
        delete process.env[SECRET];
      }
      a = await rig.engine.createSession("alice");
      b = await rig.engine.createSession("bob");
    });
    after(async () => rig?.close());

    it("runs each session as an unprivileged uid and gid of its own, with no supplementary groups", async () => {
      const [uidA, gidA] = (await json(a, "c(unix::getuid(), unix::getgid())")) as number[];
      const uidB = (await json(b, "unix::getuid()")) as number;
      const { first, last } = rig.config.sessionUids;
      expect(uidA).to.be.within(first, last);
      expect(gidA).to.equal(uidA);
      expect(uidB).to.be.within(first, last).and.not.equal(uidA);
      const groups = (await json(a, "grep('^Groups:', readLines('/proc/self/status'), value = TRUE)")) as string;
      expect(groups.replace("Groups:", "").trim()).to.equal("");
    });

    it("gives R an allow-listed environment: nothing of the service's own", async () => {
      const names = (await json(a, "names(Sys.getenv())")) as string[];
      expect(names).to.not.include(SECRET);
      // R's start script sets a few of its own (EDITOR, PAGER, MAKE, SHLVL, …).
      const allowed = /^(PATH|HOME|LANG|LANGUAGE|TZ|TMPDIR|PWD|LC_.*|R_.*|EDITOR|PAGER|MAKE|SED|TAR|LN_S|SHLVL|LD_LIBRARY_PATH)$/;
      expect(names.filter((n) => !allowed.test(n))).to.deep.equal([]);
      expect(names.filter((n) => n.startsWith("ROCK_"))).to.deep.equal([]);
    });

    it("keeps the session's folders 0700 and its own, with a tempdir of its own", async () => {
      const [work, tmp] = (await json(a, "c(getwd(), tempdir())")) as [string, string];
      const uid = (await json(a, "unix::getuid()")) as number;
      for (const dir of [work, tmp, dirname(work)]) {
        const st = await stat(dir);
        expect(st.mode & 0o777, dir).to.equal(0o700);
        expect(st.uid, dir).to.equal(uid);
      }
      expect(tmp).to.not.equal(work);
      expect(await json(a, "startsWith(tempfile(), tempdir())")).to.equal(true);
    });

    it("cannot read the data folder, the console log, the R server's folder or Node's /proc entries", async () => {
      const log = join(rig.dataDir, "rserver.log");
      rig.log.append("a line another user printed\n");
      for (const code of [
        `readLines('${log}')`,
        `readLines('/proc/${process.pid}/environ')`,
        `list.files('/proc/${process.pid}/fd')`,
        `list.files('${join(rig.dataDir, "rserver-tmp")}', recursive = TRUE)`,
      ]) {
        const answer = (await json(a, attempt(code))) as unknown;
        expect(Array.isArray(answer) && answer.length === 0 ? "refused: nothing listed" : String(answer), code).to.match(/^refused:/);
      }
      // The data folder may be passed through, never listed.
      expect(await json(a, `list.files('${rig.dataDir}')`)).to.deep.equal([]);
      const sessionsDir = dirname(dirname(String(await json(b, "getwd()"))));
      expect(await json(a, `list.files('${sessionsDir}')`)).to.deep.equal([]);
    });

    it("cannot read or write another session's folder", async () => {
      const workB = (await json(b, "getwd()")) as string;
      await json(b, "writeLines('private', 'mine.txt')");
      expect(await json(a, attempt(`readLines('${workB}/mine.txt')`))).to.match(/^refused:/);
      expect(await json(a, attempt(`writeLines('x', '${workB}/planted.txt'); 'written'`))).to.match(/^refused:/);
      expect(await json(b, "file.exists('planted.txt')")).to.equal(false);
    });

    it("cannot signal another session, the R server or the service", async () => {
      const pidB = (await json(b, "Sys.getpid()")) as number;
      const targets = [pidB, rig.engine.serverPid!, process.pid];
      const killed = (await json(a, `sapply(c(${targets.join(",")}), function(p) tools::pskill(p, tools::SIGKILL))`)) as boolean[];
      expect(killed).to.deep.equal([false, false, false]);
      for (const pid of targets) expect(alive(pid), String(pid)).to.equal(true);
      expect(await json(b, "1 + 1")).to.equal(2);
    });

    it("quit() in one session leaves tempfile() working for the next", async () => {
      const doomed = await rig.engine.createSession("carol");
      await doomed.eval(Buffer.from("quit(save = 'no')"), "json").catch(() => undefined);
      await until(() => doomed.closed);
      const next = await rig.engine.createSession("carol");
      expect(await json(next, "writeLines('x', f <- tempfile()); file.exists(f)")).to.equal(true);
      await next.end();
    });

    it("has each session prove itself with a secret it left in its own folder, removed once it started", async () => {
      const file = proofFile(a.dirs.work);
      // Node removes it once both connections made the proof: the session never sees it.
      await until(
        async () =>
          !(await stat(file).then(
            () => true,
            () => false,
          )),
      );
      expect(await readdir(a.dirs.home)).to.not.include(PROOF_FILE);
      expect(await json(a, `file.exists(file.path(dirname(getwd()), ${JSON.stringify(PROOF_FILE)}))`)).to.equal(false);
    });
  });

  // With quotas a session's processes are ended through its control group, without them through its uid.
  for (const withQuotas of [false, true]) {
    describe(withQuotas ? "the end of a session, with quotas (its control group)" : "the end of a session", () => {
      let rig: Rig;
      let quotas: SessionQuotas | undefined;
      before(async function () {
        if (!withQuotas) return;
        const probe = SessionQuotas.open(quotaSettings(testSessionUids()));
        if (!(probe instanceof SessionQuotas)) {
          console.log(`      skipped: ${probe.unavailable}`);
          this.skip();
        }
        await probe.close();
      });
      afterEach(async () => {
        await rig?.close();
        await quotas?.close();
        quotas = undefined;
      });
      const start = async (sessionUids: UidRange, overrides: Partial<RConfig> = {}): Promise<Rig> => {
        if (!withQuotas) return startRig({ sessionUids, ...overrides });
        const opened = SessionQuotas.open(quotaSettings(sessionUids));
        if (!(opened instanceof SessionQuotas)) throw new Error(opened.unavailable);
        quotas = opened;
        return startRig({ sessionUids, ...overrides }, { quotas });
      };

      it("ends every process of its uid, those started with setsid or mcparallel too, and removes its folders", async () => {
        rig = await start(testSessionUids());
        const session = await rig.engine.createSession("alice");
        const [uid, pid] = (await json(session, "c(unix::getuid(), Sys.getpid())")) as [number, number];
        if (withQuotas) expect(readFileSync(`/proc/${pid}/cgroup`, "utf8")).to.include("/rock-sessions-");
        await json(session, "system('setsid sleep 300 > /dev/null 2>&1 < /dev/null &'); parallel::mcparallel(Sys.sleep(300)); TRUE");
        await until(async () => ((await liveProcessesByUid((u) => u === uid)).get(uid)?.length ?? 0) >= 3);
        const home = session.dirs.home;
        await session.end();
        expect((await liveProcessesByUid((u) => u === uid)).has(uid)).to.equal(false);
        await stat(home).then(
          () => expect.fail(`${home} is still there`),
          (e: NodeJS.ErrnoException) => expect(e.code).to.equal("ENOENT"),
        );
      });

      it("hands a uid to the next session only once the last one's processes and files are gone", async () => {
        const first = 100_000 + Math.floor(Math.random() * 40_000) * 100;
        // Two uids: one for a session, one for the spare forked ahead.
        rig = await start({ first, last: first + 1 }, { maxSessions: 0 });
        const one = await rig.engine.createSession("alice");
        const two = await rig.engine.createSession("bob");
        const error = await rig.engine.createSession("carol").then(
          () => undefined,
          (e: Error) => e,
        );
        expect(error?.message).to.match(/every session uid/);
        await json(
          one,
          "writeLines('left over', file.path(tempdir(), 'note.txt')); system('setsid sleep 300 > /dev/null 2>&1 < /dev/null &')",
        );
        const uidOne = (await json(one, "unix::getuid()")) as number;
        await one.end();
        const three = await rig.engine.createSession("carol");
        expect(await json(three, "unix::getuid()")).to.equal(uidOne);
        expect(await json(three, "list.files(tempdir())")).to.deep.equal([]);
        const processes = (await liveProcessesByUid((u) => u === uidOne)).get(uidOne) ?? [];
        expect(processes).to.have.length(1); // the new session's R process only
        await Promise.all([two.end(), three.end()]);
      });
    });
  }

  describe("leftovers of a crashed run", () => {
    it("removes orphan session folders and ends processes of the session uids at start", async () => {
      const sessionUids = testSessionUids();
      const uid = sessionUids.first + 7;
      const dataDir = await mkdtemp(join(tmpdir(), "rock-r-test-"));
      await chmod(dataDir, 0o711);
      const orphan = join(dataDir, "sessions", "0f1e2d3c-orphan", "work");
      await mkdir(orphan, { recursive: true });
      await writeFile(join(orphan, "data.csv"), "x\n1\n");
      const sleeper = spawn("sleep", ["300"], { uid, gid: uid, detached: true, stdio: "ignore" });
      try {
        await until(() => alive(sleeper.pid!));
        const rig = await startRig({ sessionUids }, { dataDir });
        try {
          expect(await readdir(join(dataDir, "sessions"))).to.not.include("0f1e2d3c-orphan");
          await until(() => sleeper.exitCode !== null || sleeper.signalCode !== null);
          expect(sleeper.signalCode).to.equal("SIGKILL");
        } finally {
          await rig.close();
        }
      } finally {
        sleeper.kill("SIGKILL");
        await rm(dataDir, { recursive: true, force: true });
      }
    });
  });

  describe("a session's limits", () => {
    let rig: Rig;
    afterEach(async () => rig?.close());

    it("fails an allocation past its memory limit and stays usable", async () => {
      rig = await startRig({ sessionMemoryMb: 1024 });
      const session = await rig.engine.createSession("alice");
      const error = await session.eval(Buffer.from("x <- numeric(5e8); length(x)"), "json").then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error?.message).to.match(/cannot allocate/);
      expect(await json(session, "1 + 1")).to.equal(2);
    });

    it("refuses a serialized value that claims more than it carries without allocating it", async () => {
      rig = await startRig();
      const session = await rig.engine.createSession("alice");
      // serialize(0, NULL) ends with the vector's length (1) and its one double: claim 2^31 - 1 instead.
      const small = Buffer.from(await session.eval(Buffer.from("0"), "rds"));
      const claim = Buffer.concat([small.subarray(0, small.length - 12), Buffer.from([0x7f, 0xff, 0xff, 0xff])]);
      const error = await session.assign("x", { kind: "rdata", bytes: claim }).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error?.message).to.match(/cannot allocate|read error|unknown/i);
      expect(await json(session, "exists('x')")).to.equal(false);
    });

    it("stops a fork bomb at the process limit", async () => {
      rig = await startRig({ sessionProcesses: 8 });
      const session = await rig.engine.createSession("alice");
      const started = (await json(
        session,
        "sum(vapply(1:20, function(i) !inherits(try(parallel::mcparallel(Sys.sleep(30)), silent = TRUE), 'try-error'), TRUE))",
      )) as number;
      expect(started).to.be.below(8);
      expect(await json(session, "1 + 1")).to.equal(2);
    });

    it("interrupts an evaluation past its CPU time and keeps the session", async () => {
      rig = await startRig({ maxEvalCpuSeconds: 1 });
      const session = await rig.engine.createSession("alice");
      await json(session, "kept <- 42");
      const error = await session.eval(Buffer.from("repeat {}"), "json").then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error?.message).to.match(/interrupted/);
      expect(await json(session, "kept")).to.equal(42);
    });

    it("ends a session whose code ignores the interrupt of its time limit", async () => {
      rig = await startRig({ maxEvalSeconds: 1, interruptGraceSeconds: 1 });
      const session = await rig.engine.createSession("alice");
      const error = await session.eval(Buffer.from("repeat tryCatch(Sys.sleep(10), interrupt = function(i) NULL)"), "json").then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error?.message).to.match(/ended/);
      await until(() => session.closed);
      expect(() => rig.engine.session(session.id)).to.throw(/No such R session/);
    });
  });

  it("refuses to start when the configuration file is readable by every user", async () => {
    const dir = await mkdtemp(join(tmpdir(), "rock-config-"));
    const log = openTestLog("a server in this process", dir);
    try {
      const file = join(dir, "rock.yaml");
      await writeFile(file, "users: []\n", { mode: 0o644 });
      await chmod(file, 0o644);
      const base = defaults();
      const config = {
        ...base,
        port: 0,
        host: "127.0.0.1",
        dataDir: join(dir, "data"),
        configFile: file,
        r: { ...base.r, startOnBoot: false, sessionUids: testSessionUids() },
      };
      const error = await startRock(config, { logger: testLogger(log), announce: () => {} }).then(
        async (rock) => {
          await rock.close();
          return undefined;
        },
        (e: Error) => e,
      );
      expect(error?.message).to.match(/readable by every user.*chmod o-r/);
    } finally {
      log.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("isolation without root", () => {
  it("warns loudly, and refuses with r.isolation: required", () => {
    const r = defaults().r;
    const relaxed = decideIsolation(r, 1000);
    expect(relaxed.isolated).to.equal(false);
    expect(relaxed.warning).to.match(/NOT ISOLATED/);
    expect(() => decideIsolation({ ...r, isolation: "required" }, 1000)).to.throw(/required/);
    expect(decideIsolation({ ...r, isolation: "required" }, 0)).to.deep.equal({ isolated: true });
  });
});
