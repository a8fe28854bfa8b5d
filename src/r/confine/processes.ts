import { spawn } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";

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

const REAP_ROUNDS = 20;
const REAP_PAUSE_MS = 50;

/**
 * Ends every process of `uid`; true once none is left alive. A process in uninterruptible sleep dies
 * when it wakes, so the check is repeated a few times before giving up.
 */
export async function reapUid(uid: number, gid: number): Promise<boolean> {
  for (let round = 0; round < REAP_ROUNDS; round++) {
    await killAllAs(uid, gid);
    const left = await liveProcessesByUid((u) => u === uid);
    if (!left.has(uid)) return true;
    await new Promise((resolve) => setTimeout(resolve, REAP_PAUSE_MS));
  }
  return false;
}

/** Clock ticks per second of /proc's CPU times (USER_HZ): 100 on every Linux ABI Node runs on. */
const USER_HZ = 100;

/** CPU time (user + system) the process used so far, in seconds; undefined once it is gone. */
export async function cpuSeconds(pid: number): Promise<number | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / USER_HZ;
  } catch {
    return undefined;
  }
}
