import { expect } from "chai";
import type { Fault } from "../../src/errors/fault.js";
import { readFileSync, readdirSync, realpathSync } from "node:fs";
import { chown, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { decideIsolation, sessionsRoot } from "../../src/r/confine/isolation.js";
import { holdsProof } from "../../src/r/process/proof.js";
import { testSessionUids } from "../support/uids.js";
import { ConsoleLog } from "../../src/r/process/console-log.js";
import { processes } from "../support/procfs.js";
import { alive, caller, collect, ctxOf, sleep, startRig, text, until, type Rig } from "./support.js";

const admin = caller("root", "administrator");

/** The processes forked by the R server `serverPid` (its process group); no session runs here. */
function sparesOf(serverPid: number | undefined): number[] {
  return processes()
    .filter((p) => p.pgrp === serverPid && p.pid !== serverPid && !p.zombie)
    .map((p) => p.pid);
}

describe("R server process", function () {
  this.timeout(60_000);
  let rig: Rig | undefined;
  afterEach(async () => rig?.close());

  const status = async () =>
    (await rig!.handlers.getServerStatus!({ $typeName: "rock.r.v1.GetServerStatusRequest" }, ctxOf(admin))).status!;

  it("reports status, version and Check; stops (ending sessions) and starts again", async () => {
    rig = await startRig();
    const running = await status();
    expect(running.running).to.equal(true);
    expect(running.version).to.match(/^\d+\.\d+\.\d+$/);
    expect(running.system!.cores).to.be.greaterThan(0);
    expect(running.system!.freeMemory).to.be.greaterThan(0);
    expect(running.tags).to.deep.equal(["t1"]);
    await rig.handlers.check!({ $typeName: "rock.r.v1.CheckRequest" }, ctxOf(admin));
    const version = await rig.handlers.getVersion!({ $typeName: "rock.r.v1.GetVersionRequest", accept: "" }, ctxOf(admin));
    expect(version.answer?.case).to.equal("version");
    expect((version.answer?.value as Record<string, unknown> | undefined)?.language).to.equal("R");

    const session = await rig.engine.createSession("alice");
    const pid = Number((await session.eval(text("Sys.getpid()"), "json")).toString());
    expect((await status()).sessions).to.deep.include({ total: 1, busy: 0 });
    const stopped = (await rig.handlers.stopServer!({ $typeName: "rock.r.v1.StopServerRequest" }, ctxOf(admin))).status!;
    expect(stopped).to.deep.include({ running: false });
    expect(stopped.system).to.deep.include({ cores: -1, freeMemory: -1 });
    expect(stopped.sessions).to.deep.include({ total: 0 });
    await until(() => !alive(pid));
    const check = await Promise.resolve(rig.handlers.check!({ $typeName: "rock.r.v1.CheckRequest" }, ctxOf(admin))).catch(
      (e: unknown) => e,
    );
    expect((check as Fault).kind).to.equal("internal");
    const refused = await rig.engine.createSession("alice").catch((e: unknown) => e);
    expect((refused as Fault).kind).to.equal("internal");

    const started = (await rig.handlers.startServer!({ $typeName: "rock.r.v1.StartServerRequest" }, ctxOf(admin))).status!;
    expect(started.running).to.equal(true);
    const again = await rig.engine.createSession("alice");
    expect((await again.eval(text("1 + 1"), "json")).toString()).to.equal("2");
  });

  it("notices a crash, ends the sessions and restarts when autoRestart is set", async () => {
    rig = await startRig({ autoRestart: true });
    const session = await rig.engine.createSession("alice");
    const serverPid = rig.engine.serverPid!;
    const childPid = Number((await session.eval(text("Sys.getpid()"), "json")).toString());
    process.kill(serverPid, "SIGKILL");
    await until(() => !rig!.engine.running);
    await until(() => session.closed);
    await until(() => !alive(childPid));
    await until(() => rig!.engine.running);
    const next = await rig.engine.createSession("alice");
    expect((await next.eval(text("'back'"), "json")).toString()).to.equal('"back"');
    expect(rig.log.last(1000).join("\n")).to.contain("exited unexpectedly");
  });

  it("ends the spare sessions when R stops, after a crash and at close, and forks new ones at each start", async () => {
    rig = await startRig({ spareSessions: 2, autoRestart: true });
    const { isolated } = decideIsolation(rig.config);
    const sessionsDir = sessionsRoot(rig.config, rig.dataDir, isolated);
    const { first, last } = rig.config.sessionUids;
    const uidsOf = (pids: readonly number[]): number[] =>
      processes()
        .filter((p) => pids.includes(p.pid))
        .map((p) => p.uid);
    /**
     * The spares of the running server once both are forked and, when isolated, confined (a fork is
     * still root until it takes its uid): their processes, uids and folders.
     */
    const warm = async () => {
      const confined = (pids: readonly number[]) => !isolated || uidsOf(pids).every((uid) => uid >= first && uid <= last);
      await until(
        () =>
          sparesOf(rig!.engine.serverPid).length === 2 &&
          readdirSync(sessionsDir).length === 2 &&
          confined(sparesOf(rig!.engine.serverPid)),
      );
      const pids = sparesOf(rig!.engine.serverPid);
      return { pids, uids: uidsOf(pids), folders: readdirSync(sessionsDir) };
    };
    /** Nothing of `spares` is left: no process, no process of their uids (when they have their own), no folder. */
    const gone = async (spares: Awaited<ReturnType<typeof warm>>): Promise<void> => {
      await until(() => spares.pids.every((pid) => !alive(pid)));
      if (isolated) await until(() => !processes().some((p) => spares.uids.includes(p.uid) && !p.zombie));
      await until(() => !readdirSync(sessionsDir).some((name) => spares.folders.includes(name)));
    };

    const initial = await warm();
    await rig.engine.stop();
    await gone(initial);
    expect(readdirSync(sessionsDir)).to.deep.equal([]);
    await rig.engine.start();
    const second = await warm();
    expect(second.pids).to.not.include.members(initial.pids);

    process.kill(rig.engine.serverPid!, "SIGKILL");
    await until(() => !rig!.engine.running);
    await gone(second);
    await until(() => rig!.engine.running);
    const third = await warm();

    await rig.engine.close();
    await gone(third);
    expect(readdirSync(sessionsDir)).to.deep.equal([]);
  });

  it("stays stopped after a crash without autoRestart", async () => {
    rig = await startRig({ autoRestart: false });
    const serverPid = rig.engine.serverPid!;
    process.kill(serverPid, "SIGKILL");
    await until(() => !rig!.engine.running);
    await sleep(1500);
    expect((await status()).running).to.equal(false);
  });

  it("puts the configured package library first in every session's .libPaths(), creating it", async () => {
    rig = await startRig({}, { library: "packages/library" });
    const library = join(rig.dataDir, "packages/library");
    const session = await rig.engine.createSession("alice");
    const paths = JSON.parse((await session.eval(text(".libPaths()"), "json")).toString()) as string[];
    expect(paths[0]).to.equal(realpathSync(library));
    // R's own libraries stay searched after it (base packages live there).
    expect(paths.length).to.be.greaterThan(1);
    expect((await session.eval(text("requireNamespace('jsonlite', quietly = TRUE)"), "json")).toString()).to.equal("true");
  });

  it("leaves R's library path alone without a configured library", async () => {
    rig = await startRig();
    const session = await rig.engine.createSession("alice");
    const paths = JSON.parse((await session.eval(text(".libPaths()"), "json")).toString()) as string[];
    expect(paths.some((p) => p.startsWith(realpathSync(rig!.dataDir)))).to.equal(false);
  });

  it("logs what sessions print; GetLog answers the last lines and TailLog follows new ones", async () => {
    rig = await startRig();
    const session = await rig.engine.createSession("alice");
    await session.eval(text("cat('line-a\\nline-b\\n')"), "json");
    const log = await rig.handlers.getLog!({ $typeName: "rock.r.v1.GetLogRequest", limit: 2 }, ctxOf(admin));
    expect(log.text?.contentType).to.equal("text/plain; charset=utf-8");
    expect(Buffer.from(log.text!.data!).toString()).to.equal("line-a\nline-b\n");
    expect(readFileSync(join(rig.dataDir, "rserver.log"), "utf8")).to.contain("line-a\nline-b\n");

    const controller = new AbortController();
    const lines: string[] = [];
    const tail = (async () => {
      for await (const m of rig!.handlers.tailLog!(
        { $typeName: "rock.r.v1.TailLogRequest", limit: 1, follow: true },
        ctxOf(admin, controller.signal),
      )) {
        lines.push((m as { line: string }).line);
        if (lines.length === 3) controller.abort();
      }
    })().then(
      () => "completed",
      (e: unknown) => e,
    );
    await sleep(50);
    await session.eval(text("cat('next-1\\n'); message('next-2')"), "json");
    expect(await tail).to.equal(controller.signal.reason);
    expect(lines).to.deep.equal(["line-b", "next-1", "next-2"]);
    const once = await collect(rig.handlers.tailLog!({ $typeName: "rock.r.v1.TailLogRequest", limit: 2, follow: false }, ctxOf(admin)));
    expect(once.map((m) => (m as { line: string }).line)).to.deep.equal(["next-1", "next-2"]);
  });
});

describe("proof of an isolated session's connections", () => {
  let dir: string;
  const uid = testSessionUids().first;
  const proof = "ab".repeat(32);
  beforeEach(async function () {
    if (process.getuid?.() !== 0) this.skip();
    dir = await mkdtemp(join(tmpdir(), "rock-proof-test-"));
  });
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  const written = async (name: string, content: string, owner: number): Promise<string> => {
    const file = join(dir, name);
    await writeFile(file, content, { mode: 0o600 });
    await chown(file, owner, owner);
    return file;
  };

  it("is held by a file of the session's uid holding exactly what the connection claims", async () => {
    const file = await written("p", proof, uid);
    expect(await holdsProof(file, uid, proof)).to.equal(true);
    expect(await holdsProof(file, uid, "cd".repeat(32))).to.equal(false);
    expect(await holdsProof(file, uid, proof.slice(1))).to.equal(false);
    expect(await holdsProof(file, uid, "")).to.equal(false);
  });

  it("is not held by a file of another uid, a link, a FIFO or nothing", async () => {
    expect(await holdsProof(await written("root", proof, 0), uid, proof)).to.equal(false);
    expect(await holdsProof(await written("other", proof, uid + 1), uid, proof)).to.equal(false);
    await symlink(await written("target", proof, uid), join(dir, "link"));
    expect(await holdsProof(join(dir, "link"), uid, proof)).to.equal(false);
    execFileSync("mkfifo", [join(dir, "fifo")]);
    await chown(join(dir, "fifo"), uid, uid);
    expect(await holdsProof(join(dir, "fifo"), uid, proof)).to.equal(false);
    expect(await holdsProof(join(dir, "missing"), uid, proof)).to.equal(false);
    expect(await holdsProof(await written("longer", `${proof}\n`, uid), uid, proof)).to.equal(false);
  });
});

describe("console log", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "rock-log-test-"));
  });
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  it("rotates past logMaxBytes and keeps logFiles files", () => {
    const log = new ConsoleLog({ file: join(dir, "rserver.log"), maxBytes: 100, files: 2 });
    for (let i = 0; i < 20; i++) log.append(`${String(i).padStart(2, "0")}-${"x".repeat(36)}\n`);
    log.close();
    expect(readdirSync(dir).sort()).to.deep.equal(["rserver.log", "rserver.log.1", "rserver.log.2"]);
    expect(readFileSync(join(dir, "rserver.log"), "utf8")).to.match(/^18-x+\n19-x+\n$/);
    expect(readFileSync(join(dir, "rserver.log.1"), "utf8")).to.match(/^16-x+\n17-x+\n$/);
    expect(log.last(3).map((l) => l.slice(0, 2))).to.deep.equal(["17", "18", "19"]);
  });

  it("keeps a line split across appends whole", () => {
    const log = new ConsoleLog({ file: join(dir, "rserver.log"), maxBytes: 1000, files: 1 });
    log.append("hel");
    log.append("lo\nwor");
    expect(log.last(10)).to.deep.equal(["hello"]);
    log.close();
  });
});
