import { spawn } from "node:child_process";
import { closeSync, openSync, readSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import type { SessionGroup } from "./cgroup-tree.js";

/** Processes whose status is read between two turns of the event loop (~0.8 ms here). */
const STATUS_BATCH = 64;
/** Enough of /proc/<pid>/status for its State and Uid lines (the 3rd and 9th). */
const STATUS_HEAD_BYTES = 1024;

/**
 * Live (not zombie) processes whose real uid is in `uids`, by uid. The status files are read
 * synchronously, a batch at a time with a turn of the event loop between batches: read through
 * libuv's threads (open, stat, read, close each a trip) a scan of 69 processes took 5.9 ms of CPU,
 * read here 0.9 (a hot loop; without quotas a session's end scans at least twice).
 */
export async function liveProcessesByUid(uids: (uid: number) => boolean): Promise<Map<number, number[]>> {
  const found = new Map<number, number[]>();
  const entries = await readdir("/proc");
  const head = Buffer.allocUnsafe(STATUS_HEAD_BYTES);
  let read = 0;
  for (const entry of entries) {
    const code = entry.charCodeAt(0);
    if (code < 48 || code > 57) continue;
    if (++read % STATUS_BATCH === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    const uid = liveUidOf(Number(entry), head);
    if (uid === undefined || !uids(uid)) continue;
    const pids = found.get(uid) ?? [];
    pids.push(Number(entry));
    found.set(uid, pids);
  }
  return found;
}

/** The real uid of process `pid`; undefined when it is gone or a zombie. `head`: a buffer to read into. */
function liveUidOf(pid: number, head: Buffer): number | undefined {
  const status = statusHead(`/proc/${pid}/status`, head);
  if (status === undefined || /^State:\s+Z/m.test(status)) return undefined;
  return Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
}

/** The first bytes of a /proc status file; undefined when its process is gone. */
function statusHead(file: string, into: Buffer): string | undefined {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch {
    return undefined;
  }
  try {
    return into.toString("latin1", 0, readSync(fd, into, 0, into.length, 0));
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * kill(-1, SIGKILL) from a process running as `uid`: the kernel signals every process of that uid in
 * one pass under its task list lock, so a process forking meanwhile cannot slip through (one found in
 * /proc and killed pid by pid could fork first). `setsid` and daemonized children are reached too.
 */
function killAllAs(uid: number, gid: number): Promise<void> {
  return new Promise((resolve) => {
    const killer = spawn("/bin/sh", ["-c", "kill -9 -1"], { uid, gid, stdio: "ignore", env: {} });
    killer.once("error", () => resolve());
    killer.once("exit", () => resolve());
  });
}

/**
 * How long a reap waits for the processes it killed to be gone: a process in uninterruptible sleep
 * dies only when it wakes, and a uid is kept out of use rather than handed on with one left.
 */
const REAP_WAIT_MS = 1_000;

/**
 * Kills with `kill` and looks with `gone` until `gone` says so (true) or REAP_WAIT_MS passed (false).
 * A killed process is gone as soon as the kernel has unmapped its memory and closed its files, which
 * a caller waits for (a session's end answers then): the pause between looks grows with the time
 * waited, a quarter of it (1 ms at first, 50 at most), so that it adds a quarter at most to the wait.
 * Each look that finds something left kills again: a process can have forked between the kill and its
 * death, or been asleep in the kernel.
 */
async function killUntilGone(kill: () => Promise<void> | void, gone: () => Promise<boolean> | boolean): Promise<boolean> {
  const start = Date.now();
  for (;;) {
    await kill();
    if (await gone()) return true;
    const waited = Date.now() - start;
    if (waited >= REAP_WAIT_MS) return false;
    await new Promise((resolve) => setTimeout(resolve, Math.min(Math.max(1, waited / 4), 50)));
  }
}

/**
 * Ends every process of `uid`, found in /proc; true once none is left alive. Most sessions end with
 * processes that fork no more (their R process, what it started and waits for): each is killed by its
 * pid, from here (a pid a look found still names that process, as in killListed). Once a look finds
 * a process that was not there before (forked meanwhile, or missed by a listing), or a signal is
 * refused (EPERM: a security module's rule), each kill is kill(-1) as the uid (killAllAs), which no
 * fork slips through. That spawns a process, a fork of this one on the event loop, which came before
 * a DELETE could answer when it was the first kill: delete p50 5.0 ms without quotas, 1.1–2.5 ms now
 * (by hand, 60 create + delete cycles 30 ms apart; test/bench/README.md, issue 40).
 */
export async function reapUid(uid: number, gid: number): Promise<boolean> {
  const killed = new Set<number>();
  let asUid = false;
  // Once a look of all /proc after a kill finds nothing that kill missed (kill(-1) misses nothing),
  // every process of the uid has SIGKILL pending, and a process with a signal pending cannot fork:
  // what is left only dies. Later looks read those processes' own status files, not all of /proc (a
  // session's end looked 3-4 times, each a scan of every process), and nothing is killed again.
  let dying = false;
  let live = await pidsOf(uid);
  const head = Buffer.allocUnsafe(STATUS_HEAD_BYTES);
  return killUntilGone(
    () => {
      if (dying) return;
      if (!asUid)
        for (const pid of live) {
          killed.add(pid);
          if (!killedByPid(pid)) asUid = true;
        }
      if (asUid) return killAllAs(uid, gid);
    },
    async () => {
      if (dying) {
        live = live.filter((pid) => liveUidOf(pid, head) === uid);
        return live.length === 0;
      }
      live = await pidsOf(uid);
      const missed = live.some((pid) => !killed.has(pid));
      dying = asUid || !missed;
      if (missed) asUid = true;
      return live.length === 0;
    },
  );
}

/** SIGKILL to `pid`; false when this process may not signal it. */
function killedByPid(pid: number): boolean {
  try {
    process.kill(pid, "SIGKILL");
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== "EPERM";
  }
  return true;
}

async function pidsOf(uid: number): Promise<number[]> {
  return (await liveProcessesByUid((u) => u === uid)).get(uid) ?? [];
}

/**
 * Ends every process of a session run as `uid`; true once none is left alive. `group`: the control
 * group its first process was placed in before it ran anything, so the kernel lists every process of
 * the session there (what it starts inherits the group, and only root can move a process out): they
 * are killed and looked for in the group, with nothing spawned and /proc not scanned. Without one, or
 * when the group does not empty in time, the uid's processes are ended (reapUid).
 */
export async function reapSession(uid: number, group: SessionGroup | undefined): Promise<boolean> {
  if (
    group &&
    (await killUntilGone(
      () => group.kill(),
      () => group.empty(),
    ))
  )
    return true;
  return reapUid(uid, uid);
}

/**
 * Sends `signal` to `pid` from a process running as `uid`: the kernel lets it reach only a process of
 * that uid, so a pid that another uid's process took meanwhile is never signalled. True once sent.
 */
export function signalAs(uid: number, pid: number, signal: "TERM" | "KILL" | "INT"): Promise<boolean> {
  return new Promise((resolve) => {
    const sender = spawn("/bin/sh", ["-c", 'kill -s "$0" "$1"', signal, String(pid)], { uid, gid: uid, stdio: "ignore", env: {} });
    sender.once("error", () => resolve(false));
    sender.once("exit", (code) => resolve(code === 0));
  });
}

/** Clock ticks per second of /proc's CPU and start times (USER_HZ): 100 on every Linux ABI Node runs on. */
export const USER_HZ = 100;

/** The fields of /proc/<pid>/stat after the command name (state first); undefined once it is gone. */
async function statFields(pid: number): Promise<string[] | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/** The parent of a live process (not a zombie); undefined once it has ended. */
export async function parentOf(pid: number): Promise<number | undefined> {
  const fields = await statFields(pid);
  return fields === undefined || fields[0] === "Z" ? undefined : Number(fields[1]);
}

/** CPU time (user + system) the process used so far, in seconds; undefined once it is gone. */
export async function cpuSeconds(pid: number): Promise<number | undefined> {
  const fields = await statFields(pid);
  return fields && (Number(fields[11]) + Number(fields[12])) / USER_HZ;
}

/**
 * A live process: its uid (undefined unless its real, effective, saved and file system uids are all
 * that one) and when it started, in clock ticks after boot; undefined once it has ended.
 */
export async function processIdentity(pid: number): Promise<{ uid: number | undefined; startTicks: number } | undefined> {
  const fields = await statFields(pid);
  if (fields === undefined || fields[0] === "Z") return undefined;
  let status: string;
  try {
    status = await readFile(`/proc/${pid}/status`, "utf8");
  } catch {
    return undefined;
  }
  const uids = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status)?.slice(1);
  const uid = uids?.every((u) => u === uids[0]) ? Number(uids[0]) : undefined;
  // starttime is /proc/<pid>/stat's 22nd field, the 20th after the command name.
  return { uid, startTicks: Number(fields[19]) };
}

let bootTime: Promise<number> | undefined;

/** When the host booted, in seconds since the epoch (/proc/stat's btime), which process start times count from. */
export function bootSeconds(): Promise<number> {
  bootTime ??= readFile("/proc/stat", "utf8").then((stat) => Number(/^btime\s+(\d+)/m.exec(stat)?.[1]));
  return bootTime;
}

/** Whether the process has ended (gone, or a zombie its parent has not collected yet). */
export async function hasEnded(pid: number): Promise<boolean> {
  const fields = await statFields(pid);
  return fields === undefined || fields[0] === "Z";
}
