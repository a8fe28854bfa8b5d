import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { UidRange } from "../../config/config.js";
import { lockFile } from "./file-lock.js";

export interface UidRangeLock {
  /** Lets go of the range (at the service's close, once its sessions ended). */
  release(): void;
  /** Why the range could not be locked, said at start; the service runs unlocked then. */
  readonly warning?: string;
}

/**
 * One server per range of session uids on a host. At its first R start an isolated server ends every
 * process of its range and removes its control groups and session folders (what a crashed run left),
 * which would end another running server's sessions. So it holds `<dir>/uids-<first>-<last>.lock` from
 * before anything is reaped to its close, and a second server given the range is refused, naming the
 * holder's pid, having touched nothing. The kernel lets go of the lock when its holder dies (file-lock.ts):
 * only a range whose server is gone is reaped. Where `dir` cannot be written (a read-only root file
 * system, as in some containers) the start goes on unlocked, and says so.
 */
export async function lockSessionUids(range: UidRange, dir: string): Promise<UidRangeLock> {
  const name = `${range.first}-${range.last}`;
  let lock: Awaited<ReturnType<typeof lockFile>>;
  try {
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    lock = await lockFile(join(dir, `uids-${name}.lock`), 0o644);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== "EROFS" && code !== "EACCES" && code !== "EPERM") throw e;
    return {
      release: () => undefined,
      warning: `the session uids ${name} (r.sessionUids) are not locked: ${dir} (r.lockDir, ROCK_R_LOCK_DIR) cannot be written (${code}), and a second server given the same range would end this one's sessions at its start`,
    };
  }
  if ("heldBy" in lock) {
    throw new Error(
      `The session uids ${name} (r.sessionUids, ROCK_R_SESSION_UIDS) are held by another rock-ts server, pid ${lock.heldBy ?? "unknown"}: give this one another range`,
    );
  }
  return lock;
}
