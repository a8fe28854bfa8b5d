/** Reading and writing the files of cgroup hierarchies (v1 and v2 alike). */
import { readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { rmdir } from "node:fs/promises";
import { signalProcess } from "./signals.js";
import { join } from "node:path";

/** Mount points by filesystem type and super options (mountinfo: `… mountpoint … - fstype source options`). */
export function cgroupMounts(
  mountinfo: string,
): { readonly type: string; readonly mountPoint: string; readonly options: readonly string[] }[] {
  const out: { type: string; mountPoint: string; options: string[] }[] = [];
  for (const line of mountinfo.split("\n")) {
    const [left, right] = line.split(" - ");
    if (!left || !right) continue;
    const [type = "", , superOptions = ""] = right.split(" ");
    if (type === "cgroup" || type === "cgroup2") out.push({ type, mountPoint: left.split(" ")[4]!, options: superOptions.split(",") });
  }
  return out;
}

export function numberIn(file: string): number {
  try {
    return Number(readFileSync(file, "utf8").trim()) || 0;
  } catch {
    return 0;
  }
}

/**
 * A group's memory less its inactive file pages (`usage` minus `inactiveKey` of memory.stat), the
 * working set as `docker stats` and the kubelet count it. The page cache of files a session wrote — a
 * suspended session's state among them — stays charged to the group above once the session's own group
 * is gone, until the kernel reclaims it: counted, it would fill the sessions' budget with nothing running
 * (BENCH_ONLY=suspend: 4.1 GiB charged after 20 sessions of 200 MiB were suspended).
 */
export function workingSet(usage: string, stat: string, inactiveKey: string): number {
  const used = numberIn(usage);
  let inactive = 0;
  try {
    inactive = Number(new RegExp(`^${inactiveKey} (\\d+)$`, "m").exec(readFileSync(stat, "utf8"))?.[1] ?? 0);
  } catch {
    // Gone meanwhile: its usage is what there is.
  }
  return Math.max(0, used - inactive);
}

/** Sets a limit the kernel may not have (swap accounting off): absent is fine, refused is not. */
export function trySet(file: string, value: string): void {
  try {
    writeFileSync(file, value);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
}

/** The processes a group's `cgroup.procs` lists; none once the group is gone. */
export function listedProcesses(procs: string): number[] {
  let text: string;
  try {
    text = readFileSync(procs, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw e;
  }
  return text.split("\n").filter(Boolean).map(Number);
}

/**
 * SIGKILL to each process `cgroup.procs` lists. A listed pid still names that process when it is
 * signalled: the kernel keeps the pid until the parent reaps the process, and then hands out pids in
 * turn up to pid_max before it comes round to that one again.
 */
export function killListed(procs: string): void {
  for (const pid of listedProcesses(procs)) signalProcess(pid, "SIGKILL");
}

/**
 * Removes groups, off the event loop: the kernel's rmdir of a session's four v1 groups took 0.4 ms of
 * the event loop here (a CPU profile of the server through BENCH_ONLY=r's create + delete); whether
 * all went.
 */
export async function removeAll(dirs: readonly string[]): Promise<boolean> {
  const removed = await Promise.all(
    dirs.map((dir) =>
      rmdir(dir).then(
        () => true,
        (e: unknown) => (e as NodeJS.ErrnoException).code === "ENOENT",
      ),
    ),
  );
  return removed.every(Boolean);
}

/** Removes the groups under `base` (left by a crashed run); answers those that stay. */
export function removeChildren(base: string): string[] {
  const left: string[] = [];
  for (const entry of readdirSync(base, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    try {
      rmdirSync(join(base, entry.name));
    } catch {
      left.push(join(base, entry.name));
    }
  }
  return left;
}

export function errorCode(e: unknown): string {
  return (e as NodeJS.ErrnoException).code ?? (e as Error).message;
}
