import { spawn } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import type { SessionGroup } from "./cgroup-tree.js";

/** Live (not zombie) processes whose real uid is in `uids`, by uid. */
export async function liveProcessesByUid(uids: (uid: number) => boolean): Promise<Map<number, number[]>> {
  const found = new Map<number, number[]>();
  const entries = await readdir("/proc");
  await Promise.all(
    entries.map(async (entry) => {
      if (!/^\d+$/.test(entry)) return;
      let status: string;
      try {
        status = await readFile(`/proc/${entry}/status`, "utf8");
      } catch {
        return; // Gone meanwhile.
      }
      const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
      if (!uids(uid) || /^State:\s+Z/m.test(status)) return;
      const pids = found.get(uid) ?? [];
      pids.push(Number(entry));
      found.set(uid, pids);
    }),
  );
  return found;
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

/** Ends every process of `uid`, found in /proc; true once none is left alive. */
export function reapUid(uid: number, gid: number): Promise<boolean> {
  return killUntilGone(
    () => killAllAs(uid, gid),
    async () => !(await liveProcessesByUid((u) => u === uid)).has(uid),
  );
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
