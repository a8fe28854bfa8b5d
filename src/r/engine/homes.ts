import { randomUUID } from "node:crypto";
import type { Stats } from "node:fs";
import { chmod, chown, lchown, lstat, mkdir, readdir, rmdir, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { RConfig } from "../../config/config.js";
import type { RChild } from "../process/child.js";
import type { ConsoleLog } from "../process/console-log.js";
import { searchableByOthers } from "../confine/isolation.js";
import { liveProcessesByUid, parentOf, reapSession, reapUid } from "../confine/processes.js";
import type { SessionNetwork } from "../confine/network/restricted.js";
import type { SessionQuota, SessionQuotas } from "../confine/quotas.js";
import { UidPool } from "../confine/uid-pool.js";
import { ENDING_WAIT_MS, type TeardownStep, Teardowns } from "./teardowns.js";
import { tooManySessions } from "./faults.js";
import type { SessionIdentity } from "../wire/protocol.js";
import type { RServerProcess } from "../process/rserver.js";
import type { SessionDirs, SessionFolders, SessionProcess } from "../session/home.js";

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
  /** Isolated sessions' network; the host's by default. */
  readonly network?: SessionNetwork;
  readonly quotas?: SessionQuotas;
  /** Makes a session's id; default: a random UUID. */
  readonly newSessionId?: () => string;
  /** Sessions get a package library of their own (packages.sessionInstalls is not `none`). */
  readonly sessionLibraries?: boolean;
  /** A session's end finished (its uid, its place among the sessions are free); the first try's or a retry's. */
  readonly ended?: () => void;
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
  private readonly teardowns: Teardowns;

  constructor(private readonly options: SessionHomesOptions) {
    if (options.isolated) {
      const { first, last } = options.config.sessionUids;
      this.uids = new UidPool(first, last);
    }
    this.teardowns = new Teardowns(
      (line) => options.log.append(line),
      () => options.ended?.(),
    );
  }

  /** How many sessions can still get a uid; unbounded when not isolated. */
  get available(): number {
    return this.uids?.available ?? Infinity;
  }

  /** Ended sessions (and spares) whose end goes on: each still holds its uid, and counts as a session. */
  get ending(): number {
    return this.teardowns.size;
  }

  /** Resolves once an ending session's end finished, or after `ms`. */
  oneEnded(ms: number): Promise<void> {
    return this.teardowns.oneEnded(ms);
  }

  /** The service stops: what failed of sessions' ends is not tried again; resolves once what runs is done. */
  stopEnding(): Promise<void> {
    return this.teardowns.stop();
  }

  /** The folders of session `id`. */
  folders(id: string): SessionFolders {
    const home = join(this.options.sessionsDir, id);
    return { home, work: join(home, "work"), tmp: join(home, "tmp"), library: join(home, "library"), state: join(home, STATE_FILE) };
  }

  /**
   * Creates a session's folders and forks its R process there, as a uid of its own when isolated (its
   * folders are its own and private); nothing is left behind on failure.
   */
  async fork(server: RServerProcess): Promise<Fork> {
    const id = this.options.newSessionId?.() ?? randomUUID();
    return this.forkIn(server, id, async (dirs, uid) => {
      await mkdir(dirs.home, { recursive: true, mode: 0o700 });
      const made = this.sessionFolders(dirs);
      await Promise.all(made.map((dir) => mkdir(dir, { mode: 0o700 })));
      if (uid !== undefined) await Promise.all([dirs.home, ...made].map((dir) => chown(dir, uid, uid)));
    }).catch(async (error: unknown) => {
      await removeFolders(this.folders(id));
      throw error;
    });
  }

  /**
   * Forks a new process for the suspended session `id` in its folders, which (isolated) the uid it
   * gets now is given, all that is in them; the folders stay on failure, the saved state in them.
   */
  resume(server: RServerProcess, id: string): Promise<Fork> {
    return this.forkIn(server, id, async (dirs, uid) => {
      // The session may have removed its own folders before; the home is the service's.
      await Promise.all(this.sessionFolders(dirs).map((dir) => mkdir(dir, { recursive: true, mode: 0o700 })));
      if (uid !== undefined) await ownTree(dirs.home, uid);
    });
  }

  /**
   * The folders a session's process finds made in its home: its library too when it may install
   * packages (R drops a library folder that does not exist from `.libPaths()`, and a session with
   * none installs nowhere).
   */
  private sessionFolders(dirs: SessionFolders): string[] {
    return this.options.sessionLibraries ? [dirs.work, dirs.tmp, dirs.library] : [dirs.work, dirs.tmp];
  }

  /** Takes a uid, prepares the folders with it (`prepare`) and forks; on failure the uid and the group go. */
  private async forkIn(
    server: RServerProcess,
    id: string,
    prepare: (dirs: SessionDirs, uid: number | undefined) => Promise<void>,
  ): Promise<Fork> {
    let uid = this.uids?.take();
    // A uid an ended session still holds is free once its end is done: a caller waits for that, as it
    // once waited for the DELETE.
    const deadline = Date.now() + ENDING_WAIT_MS;
    while (this.uids && uid === undefined && this.teardowns.size > 0 && Date.now() < deadline) {
      await this.teardowns.oneEnded(deadline - Date.now());
      uid = this.uids.take();
    }
    const dirs: SessionDirs = { ...this.folders(id), ...(uid === undefined ? {} : { owner: { uid, gid: uid } }) };
    if (this.uids && uid === undefined) throw tooManySessions("Too many R sessions: every session uid of r.sessionUids is in use");
    let quota: SessionQuota | undefined;
    let placing: Promise<boolean> | undefined;
    try {
      await prepare(dirs, uid);
      quota = uid === undefined ? undefined : await this.options.quotas?.session(id);
      const group = quota;
      // Moving a process into a control group waits for the kernel's RCU grace period (1-20 ms here,
      // test/bench/README.md, BENCH_ONLY=quotas): the move is made while the child confines itself and
      // connects back, not after. Only while it is still the R server's live child: a pid that ended
      // may be another process's by then.
      const forked = group && ((pid: number) => void (placing = placeChild(group, pid, server.pid)));
      const child = await server.fork(dirs.work, dirs.tmp, uid === undefined ? undefined : this.identity(uid), forked);
      // The fork waits for its first request: nothing of a caller's runs before it is in its group.
      if (!(await placing)) await quota?.place(child.pid);
      return { id, dirs, uid, child, ...(quota ? { quota } : {}) };
    } catch (error) {
      await placing?.catch(() => undefined);
      await this.suspend({ id, dirs, uid, child: undefined, ...(quota ? { quota } : {}) });
      throw error;
    }
  }

  /** Ends a session process nobody uses (a spare, a probe) and removes its folders. */
  async release(fork: Fork | undefined): Promise<void> {
    if (fork) await this.dispose(fork);
  }

  /**
   * Ends what a session leaves: every process of its uid (what it started with setsid or mcparallel
   * too), then its folders (and `also`: what the engine keeps of it); only then can the uid serve
   * another session; then its control group. Resolves after the first try of each step: one that
   * failed (processes that survive SIGKILL, a folder or a group that stays) is said and tried again in
   * the background (Teardowns), the session counted in `ending` until all is done, its uid not free.
   */
  dispose(fork: Ended, also?: TeardownStep): Promise<void> {
    fork.child?.kill();
    // Without its child the fork failed, maybe before its process was placed in the group: the uid tells.
    const group = fork.child ? fork.quota?.group : undefined;
    const { uid, quota } = fork;
    return this.teardowns.run(`R session ${fork.id}`, [
      async () => {
        if (uid !== undefined && !(await reapSession(uid, group))) throw new Error(`processes of its uid ${uid} survived SIGKILL`);
      },
      async () => {
        await Promise.all([removeFolders(fork.dirs), also?.()]);
      },
      async () => {
        if (uid !== undefined) this.uids?.give(uid);
      },
      async () => {
        if (quota && !(await quota.group.remove())) throw new Error("its control group could not be removed");
      },
    ]);
  }

  /**
   * Ends a session's processes as dispose() does, but keeps its folders, its saved state among them:
   * isolated, the home goes back to the service (root, 0700) before its uid is free, so the next
   * session of that uid cannot reach what is in it (its files are still that uid's).
   */
  async suspend(fork: Ended): Promise<void> {
    await this.endProcesses(fork, async () => {
      if (fork.uid !== undefined) await chown(fork.dirs.home, 0, 0).catch(ignoreGone);
    });
  }

  /** Kills and reaps the session's processes, removes its group, runs `then`, frees the uid. */
  private async endProcesses(fork: Ended, then: () => Promise<void>): Promise<void> {
    fork.child?.kill();
    // Without its child the fork failed, maybe before its process was placed in the group: the uid tells.
    const group = fork.child ? fork.quota?.group : undefined;
    const reaped = fork.uid === undefined || (await reapSession(fork.uid, group));
    if (reaped && fork.quota && !(await fork.quota.group.remove()))
      this.options.log.append(`The control group of session ${fork.id} could not be removed\n`);
    await then();
    if (fork.uid === undefined) return;
    if (reaped) this.uids?.give(fork.uid);
    else this.options.log.append(`Processes of session uid ${fork.uid} survived SIGKILL: the uid is not used again until restart\n`);
  }

  /**
   * Session folders and processes of a previous run of the service that ended without cleaning up
   * (a crash, SIGKILL): nobody can use them any more. The folders of sessions in `kept` (their state
   * was saved) stay, given back to the service until each is resumed.
   */
  async removeLeftovers(kept: ReadonlySet<string>): Promise<string[]> {
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
    await Promise.all(
      names.map((name) => (kept.has(name) ? this.uids && chown(join(sessionsDir, name), 0, 0) : removeTree(join(sessionsDir, name)))),
    );
    return names.filter((name) => !kept.has(name));
  }

  private identity(uid: number): SessionIdentity {
    const { config, quotas, network = { policy: "host" } } = this.options;
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
      network: network.policy,
      link: network.policy === "restricted" ? network.links.linkOf(uid) : "",
      filesystem: this.options.minimalFilesystem ? "minimal" : "host",
    };
  }
}

/** Places the R server's child `pid` in its session's group, while it is that; whether it was. */
async function placeChild(quota: SessionQuota, pid: number, serverPid: number): Promise<boolean> {
  if ((await parentOf(pid)) !== serverPid) return false;
  await quota.place(pid);
  return true;
}

/** What a session is handed of its fork: the process, and the uid its folders belong to. */
export function processOf(fork: Fork): SessionProcess {
  return { child: fork.child, ...(fork.dirs.owner ? { owner: fork.dirs.owner } : {}) };
}

/** A session's process and what it holds, when it is ended; `child` is undefined when the fork failed. */
type Ended = Omit<Fork, "child"> & { readonly child: RChild | undefined };

/** The file a session's state is saved into, in its home. */
const STATE_FILE = "session.state";

function ignoreGone(error: NodeJS.ErrnoException): void {
  if (error.code !== "ENOENT") throw error;
}

/**
 * Gives `uid` the folder `dir` and all in it, links themselves and never what they point to. Run
 * while no process of the session lives (the previous one reaped, the next not forked): nothing can
 * swap what is walked.
 */
async function ownTree(dir: string, uid: number): Promise<void> {
  await lchown(dir, uid, uid);
  const entries = await readdir(dir, { withFileTypes: true });
  await Promise.all(
    entries.map((entry) => {
      const path = join(dir, entry.name);
      return entry.isDirectory() ? ownTree(path, uid) : lchown(path, uid, uid);
    }),
  );
}

/**
 * Removes a session's folders once its processes were killed (one still running could swap a folder
 * for a symbolic link under a removal by root). Most sessions leave their folders empty: an rmdir
 * each then (a library that was never made is no matter), where a recursive removal takes a trip
 * through libuv's thread pool per step; what holds anything is removed that way. Not on the event
 * loop: the four rmdir calls took 1.7 ms a session here, which every call of every session waited
 * out when they were synchronous (a CPU profile of the server through BENCH_ONLY=r's create + delete).
 */
async function removeFolders(dirs: SessionFolders): Promise<void> {
  const removed = (dir: string) =>
    rmdir(dir).catch((error: unknown) => {
      if (dir !== dirs.library || (error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    });
  try {
    await Promise.all([dirs.work, dirs.tmp, dirs.library].map(removed));
    await removed(dirs.home);
  } catch {
    await removeTree(dirs.home);
  }
}

/**
 * Removes `path` and what it holds, symbolic links as links (each folder looked at with lstat before
 * it is read, as Node's `rm` does). A failure names the entry and the kernel's reason: Node's
 * recursive `rm` said `ENOTDIR … scandir` of a file it could not unlink (EPERM: for want of
 * CAP_FOWNER in a folder a session made sticky, an immutable file), having tried it as a folder next.
 */
async function removeTree(path: string): Promise<void> {
  let info: Stats;
  try {
    info = await lstat(path);
  } catch (error) {
    return ignoreGone(error as NodeJS.ErrnoException);
  }
  if (!info.isDirectory()) return unlink(path).catch(ignoreGone);
  const entries = await readdir(path, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
    ignoreGone(error);
    return [];
  });
  await Promise.all(
    entries.map((entry) => (entry.isDirectory() ? removeTree(join(path, entry.name)) : unlink(join(path, entry.name)).catch(ignoreGone))),
  );
  await rmdir(path).catch(ignoreGone);
}
