import { randomUUID } from "node:crypto";
import { rmdirSync } from "node:fs";
import { chmod, chown, mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { RConfig } from "../../config/config.js";
import type { RChild } from "../child.js";
import type { ConsoleLog } from "../console-log.js";
import { searchableByOthers } from "../confine/isolation.js";
import { liveProcessesByUid, reapSession, reapUid } from "../confine/processes.js";
import type { SessionQuota, SessionQuotas } from "../confine/quotas.js";
import { UidPool } from "../confine/uid-pool.js";
import { tooManySessions } from "../errors.js";
import type { SessionIdentity } from "../protocol.js";
import type { RServerProcess } from "../rserver.js";
import type { SessionDirs } from "../session.js";

export interface SessionHomesOptions {
  readonly config: RConfig;
  /** Sessions' folders live in `<sessionsDir>/<id>`. */
  readonly sessionsDir: string;
  /** Each session runs as a uid of its own from `config.sessionUids` (the service runs as root). */
  readonly isolated: boolean;
  readonly log: ConsoleLog;
  /** Isolated sessions get /tmp, /var/tmp and /dev/shm of their own. */
  readonly privateTmp?: boolean;
  /** Isolated sessions see only what R needs of the host's files. */
  readonly minimalFilesystem?: boolean;
  readonly quotas?: SessionQuotas;
  /** Makes a session's id; default: a random UUID. */
  readonly newSessionId?: () => string;
}

/** A forked session process with its folders, not handed to anyone yet. */
export interface Fork {
  readonly id: string;
  readonly dirs: SessionDirs;
  readonly child: RChild;
  /** The uid it runs as, when isolated. */
  readonly uid: number | undefined;
  /** Its control group, with quotas. */
  readonly quota?: SessionQuota;
}

/**
 * Where a session lives: its folders, its process forked from the R server (as a uid of its own and
 * in a control group of its own, when isolated) and, at its end, the disposal of all of it, after
 * which its uid can serve another session.
 */
export class SessionHomes {
  private readonly uids: UidPool | undefined;

  constructor(private readonly options: SessionHomesOptions) {
    if (options.isolated) {
      const { first, last } = options.config.sessionUids;
      this.uids = new UidPool(first, last);
    }
  }

  /** How many sessions can still get a uid; unbounded when not isolated. */
  get available(): number {
    return this.uids?.available ?? Infinity;
  }

  /**
   * Creates a session's folders and forks its R process there, as a uid of its own when isolated (its
   * folders are its own and private); nothing is left behind on failure.
   */
  async fork(server: RServerProcess): Promise<Fork> {
    const id = this.options.newSessionId?.() ?? randomUUID();
    const home = join(this.options.sessionsDir, id);
    const uid = this.uids?.take();
    const dirs: SessionDirs = {
      home,
      work: join(home, "work"),
      tmp: join(home, "tmp"),
      ...(uid === undefined ? {} : { owner: { uid, gid: uid } }),
    };
    if (this.uids && uid === undefined) throw tooManySessions("Too many R sessions: every session uid of r.sessionUids is in use");
    let quota: SessionQuota | undefined;
    try {
      await mkdir(home, { recursive: true, mode: 0o700 });
      await Promise.all([mkdir(dirs.work, { mode: 0o700 }), mkdir(dirs.tmp, { mode: 0o700 })]);
      if (uid !== undefined) await Promise.all([home, dirs.work, dirs.tmp].map((dir) => chown(dir, uid, uid)));
      quota = uid === undefined ? undefined : this.options.quotas?.session(id);
      const child = await server.fork(dirs.work, dirs.tmp, uid === undefined ? undefined : this.identity(uid));
      // The fork waits for its first request: nothing of a caller's runs before it is in its group.
      quota?.place(child.pid);
      return { id, dirs, uid, child, ...(quota ? { quota } : {}) };
    } catch (error) {
      await this.dispose({ id, dirs, uid, child: undefined, ...(quota ? { quota } : {}) });
      throw error;
    }
  }

  /** Ends a session process nobody uses (a spare, a probe) and removes its folders. */
  async release(fork: Fork | undefined): Promise<void> {
    if (fork) await this.dispose(fork);
  }

  /**
   * Ends what a session leaves: every process of its uid (what it started with setsid or mcparallel
   * too), then its folders; only then can the uid serve another session. A uid whose processes
   * survive is never handed out again.
   */
  async dispose(fork: Omit<Fork, "child"> & { readonly child: RChild | undefined }): Promise<void> {
    fork.child?.kill();
    // Without its child the fork failed, maybe before its process was placed in the group: the uid tells.
    const group = fork.child ? fork.quota?.group : undefined;
    const reaped = fork.uid === undefined || (await reapSession(fork.uid, group));
    if (reaped && fork.quota && !fork.quota.group.remove())
      this.options.log.append(`The control group of session ${fork.id} could not be removed\n`);
    await removeFolders(fork.dirs);
    if (fork.uid === undefined) return;
    if (reaped) this.uids?.give(fork.uid);
    else this.options.log.append(`Processes of session uid ${fork.uid} survived SIGKILL: the uid is not used again until restart\n`);
  }

  /**
   * Session folders and processes of a previous run of the service that ended without cleaning up
   * (a crash, SIGKILL): nobody can use them any more.
   */
  async removeLeftovers(): Promise<void> {
    const { sessionsDir } = this.options;
    await mkdir(sessionsDir, { recursive: true, mode: 0o711 });
    await chmod(sessionsDir, 0o711);
    if (this.uids && !searchableByOthers(sessionsDir)) {
      throw new Error(
        `Isolated R sessions cannot reach their folders in ${sessionsDir}: a folder above it lacks search permission for others (o+x); set r.sessionsDir elsewhere`,
      );
    }
    if (this.uids) {
      const { first, last } = this.options.config.sessionUids;
      const left = await liveProcessesByUid((uid) => uid >= first && uid <= last);
      await Promise.all([...left.keys()].map((uid) => reapUid(uid, uid)));
    }
    for (const group of this.options.quotas?.removeLeftovers() ?? [])
      this.options.log.append(`A control group of an earlier run could not be removed: ${group}\n`);
    const names = await readdir(sessionsDir);
    await Promise.all(names.map((name) => rm(join(sessionsDir, name), { recursive: true, force: true })));
  }

  private identity(uid: number): SessionIdentity {
    const { config, quotas } = this.options;
    const { sessionMemoryMb, sessionProcesses } = config;
    // With quotas the group bounds the session's real memory; RLIMIT_AS would also refuse address space
    // reserved and never used (some BLAS and parallel packages reserve much).
    const memoryBytes = quotas ? 0 : Math.max(0, sessionMemoryMb) * 1048576;
    return {
      uid,
      gid: uid,
      memoryBytes,
      processes: Math.max(0, sessionProcesses),
      privateTmp: this.options.privateTmp ?? false,
      network: config.sessionNetwork,
      filesystem: this.options.minimalFilesystem ? "minimal" : "host",
    };
  }
}

/**
 * Removes a session's folders once its processes were killed (one still running could swap a folder
 * for a symbolic link under a removal by root). Most sessions leave both folders empty: three rmdir
 * calls then, where a recursive removal makes each of its steps a trip through libuv's thread pool,
 * slow when the CPUs are busy; what holds anything is removed that way.
 */
async function removeFolders(dirs: SessionDirs): Promise<void> {
  try {
    for (const dir of [dirs.work, dirs.tmp, dirs.home]) rmdirSync(dir);
  } catch {
    await rm(dirs.home, { recursive: true, force: true });
  }
}
