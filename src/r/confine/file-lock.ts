/**
 * An exclusive lock on a file that the kernel lets go of when this process ends, however it ends
 * (SIGKILL too). Node has no flock(2): util-linux's `flock` command takes the lock on this process's own
 * descriptor of the file, handed to it as its fd 3, and exits at once. A flock(2) lock belongs to the
 * open file description, which this process keeps open: the lock outlives the command and lasts until
 * this process closes its descriptor (`release`) or dies, when the kernel closes it. No other process
 * holds the lock for this one, so none can die under it and nothing needs watching; and Node opens files
 * close-on-exec, so no child of the service (the R server, sessions) inherits the descriptor and keeps
 * the lock past the service's end. The kernel's own record of the lock (/proc/locks, lslocks) names the
 * `flock` command's pid, gone at once: the holder writes its own pid into the file instead.
 */
import { spawnSync } from "node:child_process";
import { closeSync, constants, fstatSync, ftruncateSync, lstatSync, openSync, readSync, rmSync, writeSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

export interface FileLock {
  readonly file: string;
  /** Removes the file and lets go of the lock (closes the descriptor); once is enough, more do nothing. */
  release(): void;
}

/** Another holds the lock: the pid it wrote, when it did. */
export interface LockedElsewhere {
  readonly heldBy: number | undefined;
}

/**
 * Takes the lock of `file` (created with `mode`, a symbolic link refused), or says who holds it; never
 * waits for it. The release removes the file before it lets go, so a clean stop leaves nothing behind;
 * a taker that locked a file removed meanwhile (opened before its holder's release) sees that it is no
 * longer the file at that path and takes the lock again.
 */
export async function lockFile(file: string, mode: number): Promise<FileLock | LockedElsewhere> {
  for (;;) {
    const taken = await lockOnce(file, mode);
    if (taken !== "removed") return taken;
  }
}

async function lockOnce(file: string, mode: number): Promise<FileLock | LockedElsewhere | "removed"> {
  const fd = openSync(file, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, mode);
  let held = false;
  try {
    const taken = spawnSync("flock", ["-x", "-n", "3"], { stdio: ["ignore", "ignore", "pipe", fd], encoding: "utf8", timeout: 10_000 });
    if (taken.error) throw new Error(`${file} cannot be locked: util-linux's flock command did not run (${taken.error.message})`);
    // flock -n exits 1 when another holds the lock.
    if (taken.status === 1) return { heldBy: await holderOf(fd) };
    if (taken.status !== 0) throw new Error(`${file} cannot be locked: flock: ${taken.stderr.trim() || `exit status ${taken.status}`}`);
    const atPath = lstatSync(file, { throwIfNoEntry: false });
    const own = fstatSync(fd);
    if (atPath?.ino !== own.ino || atPath.dev !== own.dev) return "removed";
    ftruncateSync(fd, 0);
    writeSync(fd, `${process.pid}\n`, 0);
    held = true;
  } finally {
    if (!held) closeSync(fd);
  }
  return {
    file,
    release: () => {
      if (!held) return;
      held = false;
      try {
        // Removed while still held: nobody can have taken this file's lock in between.
        rmSync(file, { force: true });
      } finally {
        closeSync(fd);
      }
    },
  };
}

/**
 * The pid the holder wrote into the file; it writes it just after it took the lock, so an empty file
 * is read again for a moment before the pid is given up as unknown.
 */
async function holderOf(fd: number): Promise<number | undefined> {
  const buffer = Buffer.alloc(32);
  for (let attempt = 0; attempt < 20; attempt++) {
    const text = buffer.toString("latin1", 0, readSync(fd, buffer, 0, buffer.length, 0));
    const pid = /^(\d+)\n/.exec(text)?.[1];
    if (pid) return Number(pid);
    await sleep(50);
  }
  return undefined;
}
