import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { openCgroupTree, type CgroupTree, type SessionGroup } from "../../src/r/confine/cgroups.js";
import { reapSession } from "../../src/r/confine/processes.js";
import { processes } from "../support/procfs.js";
import { testSessionUids } from "../support/uids.js";
import { until } from "./support.js";

/**
 * What a session leaves, as the engine's end of a session reaps it: a process that started another
 * in a session of its own (setsid), one that waits, and a loop that forks all the time (a child born
 * between a kill and the next look). `sh` waits for a line on stdin before it starts them, so that it
 * can be placed in a group first.
 */
const SCRIPT = "read go; setsid sleep 300 < /dev/null > /dev/null 2>&1 & (while :; do /bin/true; done) & sleep 300 & echo started; wait";

function startSession(identity: { uid: number; gid: number } | Record<string, never>): ChildProcess {
  return spawn("/bin/sh", ["-c", SCRIPT], { ...identity, stdio: ["pipe", "pipe", "ignore"] });
}

function go(child: ChildProcess): Promise<void> {
  const started = new Promise<void>((resolve) => child.stdout!.once("data", () => resolve()));
  child.stdin!.write("go\n");
  return started;
}

/** Live processes in the control group named `name` (in any hierarchy). */
function inGroup(name: string): number[] {
  const member = (pid: number): boolean => {
    try {
      return readFileSync(`/proc/${pid}/cgroup`, "utf8")
        .split("\n")
        .some((line) => line.endsWith(`/${name}`));
    } catch {
      return false;
    }
  };
  return processes()
    .filter((p) => !p.zombie && member(p.pid))
    .map((p) => p.pid);
}

const liveOf = (uid: number): number[] =>
  processes()
    .filter((p) => p.uid === uid && !p.zombie)
    .map((p) => p.pid);

function killAll(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
}

describe("the end of a session's processes (as root)", function () {
  this.timeout(30_000);
  /** What a test started, ended whatever it asserts. */
  let left: number[] = [];
  before(function () {
    if (process.getuid?.() !== 0) this.skip();
  });
  afterEach(() => killAll(left));

  describe("with the session's control group", () => {
    let tree: CgroupTree;
    before(function () {
      const opened = openCgroupTree(`rock-reap-test-${process.pid}`, 0);
      if ("unavailable" in opened) {
        console.log(`      skipped: ${opened.unavailable}`);
        this.skip();
      }
      tree = opened;
    });
    after(() => tree?.close());

    it("ends every process in the group by the group alone: the uid it is given has none, they run as root", async () => {
      const name = "session-a";
      const group: SessionGroup = await tree.session(name, { memoryBytes: 0, cpuCores: 0, processes: 0 });
      const session = startSession({});
      await group.add(session.pid!);
      await go(session);
      await until(() => inGroup(name).length >= 4);
      left = inGroup(name);
      // Killing as this uid reaches none of them: only the group's way can end them.
      const uid = testSessionUids().first;
      expect(await reapSession(uid, group)).to.equal(true);
      expect(inGroup(name)).to.deep.equal([]);
      expect(group.empty()).to.equal(true);
      expect(await group.remove()).to.equal(true);
    });
  });

  it("without a group, ends a fork bomb of the uid (RLIMIT_NPROC holds it at 64): what a kill by pid misses, a kill as the uid reaches", async () => {
    const uid = testSessionUids().first;
    // Every process forks again as soon as one of the uid's 64 slots is free: a kill pid by pid frees
    // slots that processes it has not reached yet fill at once. (bash, which waits and tries again
    // when a fork fails; dash's shell would exit.)
    const bomb = spawn("prlimit", ["--nproc=64:64", "/bin/bash", "-c", "f() { while :; do f & sleep 0.01; done; }; f"], {
      uid,
      gid: uid,
      stdio: "ignore",
    });
    try {
      await until(() => liveOf(uid).length >= 60);
      expect(await reapSession(uid, undefined)).to.equal(true);
      expect(liveOf(uid)).to.deep.equal([]);
    } finally {
      // Whatever a failed reap left: kill(-1) as the uid.
      await new Promise((resolve) => spawn("/bin/sh", ["-c", "kill -9 -1"], { uid, gid: uid, stdio: "ignore" }).once("exit", resolve));
      bomb.kill("SIGKILL");
    }
  });

  it("without a group, ends every process of the uid, those started with setsid and a forking loop too", async () => {
    const uid = testSessionUids().first;
    const session = startSession({ uid, gid: uid });
    await go(session);
    await until(() => liveOf(uid).length >= 4);
    left = liveOf(uid);
    expect(await reapSession(uid, undefined)).to.equal(true);
    expect(liveOf(uid)).to.deep.equal([]);
  });
});
