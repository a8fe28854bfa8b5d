import { randomUUID } from "node:crypto";
import { chmod, chown, readFile, mkdir, readdir, rm } from "node:fs/promises";
import { cpus } from "node:os";
import { join } from "node:path";
import type { RConfig } from "../config/config.js";
import type { ConsoleLog } from "./console-log.js";
import { searchableByOthers } from "./confine/isolation.js";
import { liveProcessesByUid, reapUid } from "./confine/processes.js";
import { UidPool } from "./confine/uid-pool.js";
import { noSuchSession, notRunning, outOfMemory, stillStarting, tooManySessions } from "./errors.js";
import type { Fault } from "../errors/fault.js";
import type { SessionQuota, SessionQuotas } from "./confine/quotas.js";
import type { RChild } from "./child.js";
import { assertTrustedProfile } from "./profile.js";
import { RServerProcess } from "./rserver.js";
import { evalFrame, type SessionIdentity, type ValueFormat } from "./protocol.js";
import { RSession, type SessionDirs } from "./session.js";

export interface REngineOptions {
  readonly config: RConfig;
  /** The R server's temporary folder lives in `<dataDir>/rserver-tmp`. */
  readonly dataDir: string;
  /** Sessions' folders live in `<sessionsDir>/<id>`. */
  readonly sessionsDir: string;
  /** Each session runs as a uid of its own from `config.sessionUids` (the service runs as root). */
  readonly isolated: boolean;
  readonly log: ConsoleLog;
  /**
   * A package library searched before R's own by the R server and so by every session (the packages
   * configuration's library); created when missing. Unset: R's default library path.
   */
  readonly library?: string;
  /** Isolated sessions get /tmp, /var/tmp and /dev/shm of their own (a mount namespace each). */
  readonly privateTmp?: boolean;
  /** Isolated sessions see only what R needs of the host's files (a root of their own each). */
  readonly minimalFilesystem?: boolean;
  /** A control group per session (isolated sessions, where the host allows): memory, CPU, processes. */
  readonly quotas?: SessionQuotas;
  /** Makes a session's id; default: a random UUID. (A cluster's ids name their node.) */
  readonly newSessionId?: () => string;
  /** Told what happens to the R server and its sessions (the service log and metrics listen). */
  readonly onEvent?: (event: EngineEvent) => void;
}

/** What the engine tells its owner; facts only, never R code or what R prints. */
export type EngineEvent =
  | { readonly kind: "server-started"; readonly restart: boolean; readonly version: string }
  | { readonly kind: "server-start-failed"; readonly restart: boolean; readonly error: string }
  | { readonly kind: "server-stopped" }
  | { readonly kind: "server-crashed"; readonly autoRestart: boolean }
  | { readonly kind: "session-opened"; readonly id: string; readonly user: string }
  | { readonly kind: "session-closed"; readonly id: string; readonly user: string }
  | { readonly kind: "session-out-of-memory"; readonly id: string; readonly user: string; readonly reason: string }
  | { readonly kind: "session-reaped"; readonly id: string; readonly user: string }
  /** A spare's process died while it waited in the pool; it is replaced at the next demand. */
  | { readonly kind: "spare-died" };

export interface EngineStatus {
  readonly running: boolean;
  /** `major.minor` of R, e.g. "4.2.2"; empty until the R server has started once. */
  readonly version: string;
  readonly sessions: {
    readonly total: number;
    readonly busy: number;
    /** With quotas: what all sessions' control groups account, and each open session's. */
    readonly memoryBytes?: number;
    readonly cpuSeconds?: number;
    readonly usage?: ReadonlyArray<{ readonly id: string; readonly memoryBytes: number; readonly cpuSeconds: number }>;
  };
  /** -1 while the R server is stopped. */
  readonly cores: number;
  /** Available host memory in KB; -1 while the R server is stopped. */
  readonly freeMemory: number;
}

const MAX_RESTART_DELAY_MS = 30_000;
/** How long Check waits for a probe session to be forked and to answer. */
const CHECK_TIMEOUT_MS = 5_000;
const PROBE_SCRIPT = evalFrame(Buffer.from("1"), "json");

/** A forked session process with its folders, not handed to anyone yet. */
interface Fork {
  readonly id: string;
  readonly dirs: SessionDirs;
  readonly child: RChild;
  /** The uid it runs as, when isolated. */
  readonly uid: number | undefined;
  /** Its control group, with quotas. */
  readonly quota?: SessionQuota;
}

/** A session process forked ahead of demand (r.spareSessions). */
interface Spare {
  /** Never rejects: undefined when the fork failed (a caller then forks itself and sees why). */
  readonly ready: Promise<Fork | undefined>;
  /** Set once `ready` gave a fork: a caller takes a ready spare before one still forking. */
  fork?: Fork;
}

/**
 * Spares forked at once. A fork waits on the R server, the child and the kernel's socket table in
 * turn, so a second one overlaps those waits (on 2 cores: ~12 ms a fork one at a time, ~9 two at a
 * time, ~7 four at a time); more at once make each fork slower for a caller waiting for one, and take
 * the CPU that running sessions are being served with.
 */
const SPARE_FORKS_AT_ONCE = 2;

/** The R server process and the sessions forked from it. */
export class REngine {
  readonly log: ConsoleLog;
  private server: RServerProcess | undefined;
  private version = "";
  private readonly sessionsById = new Map<string, RSession>();
  /** Start and stop run one at a time. */
  private transition: Promise<void> = Promise.resolve();
  private restartTimer: NodeJS.Timeout | undefined;
  private restartDelay = 1000;
  private readonly idleTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /**
   * Forking a session costs tens of ms (the R server's fork, the child's confinement, two connections
   * whose owner Node checks), so up to r.spareSessions are kept forked ahead: creating a session hands
   * one over and a replacement is forked in the background. Spares count against r.maxSessions and
   * take uids, never more than are free: a caller takes a spare before it would fork, so a uid held by
   * a spare is one held for the next caller.
   */
  private readonly spares: Spare[] = [];
  /** Forks whose death, while they wait in the pool, takes them out of it and ends them. */
  private readonly watched = new WeakSet<Fork>();
  /** A spare Check took to probe with and will put back: the pool is not refilled for it meanwhile. */
  private probing = 0;
  /** Concurrent Checks share one probe. */
  private checking: Promise<boolean> | undefined;
  private readonly uids: UidPool | undefined;
  /** Sessions being created, counted against the limits before they exist. */
  private readonly opening = new Map<string, number>();
  /** Runs once, before the first start: what a previous run of the service left behind goes. */
  private cleaned: Promise<void> | undefined;
  /** Starts under way (queued or running); with a scheduled restart, calls that need R wait for them. */
  private starts = 0;
  /** Calls waiting for a start to end. */
  private readonly waiters = new Set<() => void>();

  private readonly emit: (event: EngineEvent) => void;
  /** Open sessions' control groups (with quotas), for what they use. */
  private readonly quotaOf = new Map<string, SessionQuota>();
  /** Sessions the kernel ended for their memory, and how to say it, the latest ENDED_REMEMBERED. */
  private readonly endedSessions = new Map<string, Fault>();

  constructor(private readonly options: REngineOptions) {
    this.log = options.log;
    this.emit = options.onEvent ?? (() => {});
    if (options.isolated) {
      const { first, last } = options.config.sessionUids;
      this.uids = new UidPool(first, last);
    }
    const { sessionTimeoutMinutes, sessionCheckSeconds } = options.config;
    if (sessionTimeoutMinutes > 0 && sessionCheckSeconds > 0) {
      this.idleTimer = setInterval(() => void this.closeIdleSessions(), sessionCheckSeconds * 1000);
      this.idleTimer.unref();
    }
  }

  get running(): boolean {
    return this.server?.running ?? false;
  }

  /** The R server's process id (also its process group) while it runs. */
  get serverPid(): number | undefined {
    return this.server?.pid;
  }

  /** Starts the R server process when the configuration asks for it at service start. */
  async boot(): Promise<void> {
    if (this.options.config.startOnBoot) await this.start();
  }

  /** Starts the R server process; nothing happens when it runs already. */
  start(): Promise<void> {
    return this.launch(false);
  }

  /** A start; `restarting` after a crash, when a failure schedules the next attempt. */
  private async launch(restarting: boolean): Promise<void> {
    this.starts++;
    try {
      const started = await this.serially(() => this.spawnServer());
      if (started) this.emit({ kind: "server-started", restart: restarting, version: this.version });
      if (restarting) this.restartDelay = 1000;
    } catch (error) {
      this.emit({ kind: "server-start-failed", restart: restarting, error: (error as Error).message });
      if (restarting && !this.closed && !this.running) {
        this.log.append(`R server restart failed: ${(error as Error).message}\n`);
        this.restartDelay = Math.min(this.restartDelay * 2, MAX_RESTART_DELAY_MS);
        // Before this start counts as ended: waiting calls see R still coming.
        this.scheduleRestart();
      }
      throw error;
    } finally {
      this.starts--;
      this.wakeWaiters();
    }
  }

  /** Whether a server was started (false: closed, or one runs already). */
  private async spawnServer(): Promise<boolean> {
    if (this.closed || this.running) return false;
    this.cancelRestart();
    await (this.cleaned ??= this.removeLeftovers());
    const tmpDir = join(this.options.dataDir, "rserver-tmp");
    const { library } = this.options;
    const { profile } = this.options.config;
    await Promise.all([mkdir(tmpDir, { recursive: true, mode: 0o700 }), library ? mkdir(library, { recursive: true }) : undefined]);
    if (profile) await assertTrustedProfile(profile);
    const server = await RServerProcess.start({
      executable: this.options.config.executable,
      log: (text) => this.log.append(text),
      tmpDir,
      isolated: this.options.isolated,
      setupLibrary: this.options.config.setupLibrary,
      ...(library ? { library } : {}),
      ...(profile ? { profile } : {}),
    });
    this.server = server;
    this.version = server.version;
    server.onExit(() => this.onServerExit(server));
    this.prepareSpares();
    return true;
  }

  /** Stops the R server process and ends every session; nothing happens when it is stopped. */
  stop(): Promise<void> {
    return this.serially(async () => {
      this.cancelRestart();
      const server = this.server;
      this.server = undefined;
      const spares = this.spares.splice(0);
      this.wakeWaiters();
      await this.endAllSessions();
      await server?.stop();
      if (server) this.emit({ kind: "server-stopped" });
      // Only now: a spare still forking is abandoned by the stop instead of being waited for.
      await this.releaseSpares(spares);
    });
  }

  /** Stops everything for good (shutdown, tests). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.idleTimer);
    await this.stop();
  }

  async status(): Promise<EngineStatus> {
    const running = this.running;
    const sessions = [...this.sessionsById.values()];
    const { quotas } = this.options;
    const usage = quotas ? [...this.quotaOf].map(([id, q]) => ({ id, memoryBytes: q.group.memoryBytes(), cpuSeconds: q.group.cpuSeconds() })) : undefined;
    return {
      running,
      version: this.version,
      sessions: {
        total: sessions.length,
        busy: sessions.filter((s) => s.busy).length,
        ...(quotas && usage ? { memoryBytes: quotas.memoryBytes(), cpuSeconds: quotas.cpuSeconds(), usage } : {}),
      },
      cores: running ? cpus().length : -1,
      freeMemory: running ? await availableMemoryKb() : -1,
    };
  }

  /**
   * True when the R server runs and a session can be served: within CHECK_TIMEOUT_MS the R server
   * answers its socket and a session process (a spare, or one forked for the purpose) evaluates `1`.
   * The probe then goes back to being a spare (`1` leaves nothing in it) or is ended, so a Check never
   * leaves a process behind; spares that died since the last demand (killed from outside) are replaced.
   */
  check(): Promise<boolean> {
    this.checking ??= this.probe().finally(() => (this.checking = undefined));
    return this.checking;
  }

  private async probe(): Promise<boolean> {
    const server = this.server;
    if (!server?.running) return false;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), CHECK_TIMEOUT_MS)));
    /** `work` before the deadline, or undefined; a fork that completes late is ended as soon as it does. */
    const inTime = async (work: Promise<Fork | undefined>): Promise<Fork | undefined> => {
      const got = await Promise.race([work, deadline]);
      if (got !== "timeout") return got;
      void work.then((late) => this.release(late), () => undefined);
      return undefined;
    };
    /** The server answers its socket and the session evaluates `1`, before the deadline. */
    const serves = async (fork: Fork): Promise<boolean> => {
      // The server must answer too: a ready spare alone would hide a server that can fork no more.
      const answers = Promise.all([fork.child.run(PROBE_SCRIPT), server.ping()]);
      const outcome = await Promise.race([answers, deadline]);
      return outcome !== "timeout" && outcome[0].ok && outcome[0].value.toString("utf8") === "1";
    };
    let fork: Fork | undefined;
    let ok = false;
    const taken = this.takeSpare();
    if (taken) this.probing++;
    try {
      fork = taken && (await inTime(taken));
      if (fork && !(await serves(fork))) {
        if (!fork.child.closed) return false;
        // The spare had died (killed from outside): that says nothing about the next session.
        await this.release(fork);
        fork = undefined;
      }
      if (!fork) {
        fork = await inTime(this.forkSession(server));
        if (!fork || !(await serves(fork))) return false;
      }
      ok = true;
      return true;
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
      if (taken) this.probing--;
      if (fork) {
        if (ok && this.server === server && !this.closed && this.spares.length < this.spareTarget()) this.addSpare(Promise.resolve(fork));
        else await this.release(fork);
      }
      if (ok) this.prepareSpares();
    }
  }

  /** R.version, as JSON text or R serialization; `signal`: the caller left (see serverFor). */
  async rVersion(format: ValueFormat, signal?: AbortSignal): Promise<Buffer> {
    const server = await this.serverFor(signal);
    return server.versionValue(format);
  }

  /** A new session for `subject`; `signal`: the caller left (see serverFor). */
  async createSession(subject: string, signal?: AbortSignal): Promise<RSession> {
    const server = await this.serverFor(signal);
    this.checkLimits(subject);
    this.opening.set(subject, (this.opening.get(subject) ?? 0) + 1);
    try {
      return await this.openSession(server, subject);
    } finally {
      const n = (this.opening.get(subject) ?? 1) - 1;
      if (n > 0) this.opening.set(subject, n);
      else this.opening.delete(subject);
    }
  }

  /**
   * The running R server. While it starts (the service's own start, a restart after a crash, PUT
   * /rserver) a caller waits up to r.startWaitSeconds and is then told to come back (503): R will be
   * there, a 500 would say it is broken. Stopped for good (an administrator, a failed start): 500.
   */
  private async serverFor(signal?: AbortSignal): Promise<RServerProcess> {
    const deadline = Date.now() + Math.max(0, this.options.config.startWaitSeconds) * 1000;
    for (;;) {
      const server = this.server;
      if (server?.running) return server;
      if (this.starts === 0 && this.restartTimer === undefined) throw notRunning();
      signal?.throwIfAborted();
      const left = deadline - Date.now();
      if (left <= 0) throw stillStarting();
      await this.stateChange(left, signal);
    }
  }

  /** Resolves when a start ended or a restart was called off, after `ms`, or when `signal` fires. */
  private stateChange(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
      this.waiters.add(done);
    });
  }

  private wakeWaiters(): void {
    for (const wake of [...this.waiters]) wake();
  }

  /** Whether a session runs or has queued an operation (an async command too). */
  get busy(): boolean {
    return this.sessions().some((s) => s.busy);
  }

  /** Sessions open and being opened, in total and for `subject`, against the configured limits. */
  private checkLimits(subject: string): void {
    const { maxSessions, maxSessionsPerUser } = this.options.config;
    if (maxSessions > 0 && this.sessionsById.size + sum(this.opening.values()) >= maxSessions) {
      throw tooManySessions(`Too many R sessions: the server's limit of ${maxSessions} open sessions is reached`);
    }
    const { quotas } = this.options;
    if (quotas && !quotas.fits()) {
      throw tooManySessions(`Too many R sessions: the R sessions' memory budget of ${this.options.config.sessionsMemoryMb} MiB (r.sessionsMemoryMb) is in use`);
    }
    if (maxSessionsPerUser > 0) {
      let own = this.opening.get(subject) ?? 0;
      for (const s of this.sessionsById.values()) if (s.subject === subject) own++;
      if (own >= maxSessionsPerUser) {
        throw tooManySessions(`Too many R sessions: ${subject} has ${own} open sessions, the limit per user is ${maxSessionsPerUser}; close one first`);
      }
    }
  }

  private async openSession(server: RServerProcess, subject: string): Promise<RSession> {
    let fork: Fork | undefined;
    while (!fork) {
      const taken = this.takeSpare();
      if (!taken) break;
      // The replacement forks while this one is handed over.
      this.prepareSpares();
      fork = await taken;
      if (fork?.child.closed) {
        await this.release(fork);
        fork = undefined;
      }
    }
    if (!fork) {
      // No spare: this caller's fork takes its uid before any replacement does, so when few uids are
      // left the caller gets one rather than a spare.
      const own = this.forkSession(server);
      this.prepareSpares();
      fork = await own;
    }
    if (this.server !== server) {
      // The server stopped meanwhile: its process group, this child included, is gone or going.
      await this.release(fork);
      throw notRunning();
    }
    const { id, dirs, child } = fork;
    const { maxEvalSeconds, maxEvalCpuSeconds, interruptGraceSeconds } = this.options.config;
    // Its uid and its place under r.maxSessions are free again once it is disposed of: a spare can take them.
    const dispose = (): Promise<void> => this.dispose(fork).finally(() => this.prepareSpares());
    // A session the kernel ended for its memory says so, to its running call and to every later one.
    const endedBy = (): Fault | undefined => {
      const reason = fork.quota?.endedBy();
      if (reason === undefined) return undefined;
      this.emit({ kind: "session-out-of-memory", id, user: subject, reason });
      return remember(this.endedSessions, id, outOfMemory(reason));
    };
    const session = new RSession(id, subject, dirs, child, { maxEvalSeconds, maxEvalCpuSeconds, interruptGraceSeconds, endedBy }, dispose);
    this.sessionsById.set(id, session);
    if (fork.quota) this.quotaOf.set(id, fork.quota);
    this.emit({ kind: "session-opened", id, user: subject });
    session.onEnd(() => {
      this.sessionsById.delete(id);
      this.quotaOf.delete(id);
      this.emit({ kind: "session-closed", id, user: subject });
    });
    return session;
  }

  /**
   * Creates a session's folders and forks its R process there, as a uid of its own when isolated (its
   * folders are its own and private); nothing is left behind on failure.
   */
  private async forkSession(server: RServerProcess): Promise<Fork> {
    const id = this.options.newSessionId?.() ?? randomUUID();
    const home = join(this.options.sessionsDir, id);
    const uid = this.uids?.take();
    const dirs: SessionDirs = { home, work: join(home, "work"), tmp: join(home, "tmp"), ...(uid === undefined ? {} : { owner: { uid, gid: uid } }) };
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


  private identity(uid: number): SessionIdentity {
    const { sessionMemoryMb, sessionProcesses } = this.options.config;
    // With quotas the group bounds the session's real memory; RLIMIT_AS would also refuse address space
    // reserved and never used (some BLAS and parallel packages reserve much).
    const memoryBytes = this.options.quotas ? 0 : Math.max(0, sessionMemoryMb) * 1048576;
    return {
      uid,
      gid: uid,
      memoryBytes,
      processes: Math.max(0, sessionProcesses),
      privateTmp: this.options.privateTmp ?? false,
      network: this.options.config.sessionNetwork,
      filesystem: this.options.minimalFilesystem ? "minimal" : "host",
    };
  }

  /**
   * Ends what a session leaves: every process of its uid (what it started with setsid or mcparallel
   * too), then its folders; only then can the uid serve another session. A uid whose processes
   * survive is never handed out again.
   */
  private async dispose(fork: Omit<Fork, "child"> & { readonly child: RChild | undefined }): Promise<void> {
    fork.child?.kill();
    const reaped = fork.uid === undefined || (await reapUid(fork.uid, fork.uid));
    if (reaped && fork.quota && !fork.quota.group.remove()) this.log.append(`The control group of session ${fork.id} could not be removed\n`);
    await rm(fork.dirs.home, { recursive: true, force: true });
    if (fork.uid === undefined) return;
    if (reaped) this.uids?.give(fork.uid);
    else this.log.append(`Processes of session uid ${fork.uid} survived SIGKILL: the uid is not used again until restart\n`);
  }

  /**
   * Session folders and processes of a previous run of the service that ended without cleaning up
   * (a crash, SIGKILL): nobody can use them any more.
   */
  private async removeLeftovers(): Promise<void> {
    const { sessionsDir } = this.options;
    await mkdir(sessionsDir, { recursive: true, mode: 0o711 });
    await chmod(sessionsDir, 0o711);
    if (this.uids && !searchableByOthers(sessionsDir)) {
      throw new Error(`Isolated R sessions cannot reach their folders in ${sessionsDir}: a folder above it lacks search permission for others (o+x); set r.sessionsDir elsewhere`);
    }
    if (this.uids) {
      const { first, last } = this.options.config.sessionUids;
      const left = await liveProcessesByUid((uid) => uid >= first && uid <= last);
      await Promise.all([...left.keys()].map((uid) => reapUid(uid, uid)));
    }
    for (const group of this.options.quotas?.removeLeftovers() ?? []) this.log.append(`A control group of an earlier run could not be removed: ${group}\n`);
    const names = await readdir(sessionsDir);
    await Promise.all(names.map((name) => rm(join(sessionsDir, name), { recursive: true, force: true })));
  }

  /**
   * How many spares `r.spareSessions` asks for, less what r.maxSessions leaves: spares, sessions and
   * sessions being opened (each takes a spare or forks) never exceed it together.
   */
  private spareTarget(): number {
    const { spareSessions, maxSessions } = this.options.config;
    const room = maxSessions > 0 ? maxSessions - this.sessionsById.size - sum(this.opening.values()) : Infinity;
    return Math.max(0, Math.min(spareSessions, room));
  }

  /**
   * Forks spares of the running server up to the target, SPARE_FORKS_AT_ONCE at a time, and only with
   * uids that are free (a spare never makes a caller wait for a uid: the caller would take that spare).
   */
  private prepareSpares(): void {
    const server = this.server;
    if (this.closed || !server?.running) return;
    const target = this.spareTarget();
    let forking = this.spares.filter((s) => !s.fork).length;
    while (this.spares.length + this.probing < target && forking < SPARE_FORKS_AT_ONCE && (this.uids?.available ?? 1) > 0) {
      forking++;
      const ready = this.forkSession(server).then(
        (fork): Fork | undefined => fork,
        () => undefined,
      );
      const spare = this.addSpare(ready);
      void ready.then((fork) => {
        // A spare that failed leaves the pool; the next demand forks again (no retry loop here).
        if (fork) this.prepareSpares();
        else this.removeSpare(spare);
      });
    }
  }

  /**
   * Puts a spare in the pool. One whose process dies there (killed from outside) is ended at once; it
   * is not replaced until the next demand, so spares that keep dying cannot keep R forking.
   */
  private addSpare(ready: Promise<Fork | undefined>): Spare {
    const spare: Spare = { ready };
    this.spares.push(spare);
    void ready.then((fork) => {
      if (!fork) return;
      spare.fork = fork;
      if (this.watched.has(fork)) return;
      this.watched.add(fork);
      fork.child.onClose(() => {
        const pooled = this.spares.find((s) => s.fork === fork);
        if (pooled) {
          this.removeSpare(pooled);
          void this.release(fork);
          this.emit({ kind: "spare-died" });
        }
      });
    });
    return spare;
  }

  private removeSpare(spare: Spare): void {
    const i = this.spares.indexOf(spare);
    if (i >= 0) this.spares.splice(i, 1);
  }

  /**
   * Takes a spare out of the pool, a ready one first, else the one forking longest: it is then the
   * caller's alone. Undefined when there is none. (The pool only ever holds spares of the running
   * server: stopping it or its exit empties the pool.)
   */
  private takeSpare(): Promise<Fork | undefined> | undefined {
    const spare = this.spares.find((s) => s.fork) ?? this.spares[0];
    if (!spare) return undefined;
    this.removeSpare(spare);
    return spare.ready;
  }

  /** Ends spares taken out of the pool, those still forking once they are forked. */
  private async releaseSpares(spares: readonly Spare[]): Promise<void> {
    await Promise.all(spares.map(async (spare) => this.release(await spare.ready)));
  }

  /** Ends a session process nobody uses and removes its folders. */
  private async release(fork: Fork | undefined): Promise<void> {
    if (fork) await this.dispose(fork);
  }

  /** The session, or NotFound (or, for a session its memory limit ended, that). */
  session(id: string): RSession {
    const session = this.sessionsById.get(id);
    if (!session) throw this.endedSessions.get(id) ?? noSuchSession(id);
    return session;
  }

  sessions(): RSession[] {
    return [...this.sessionsById.values()];
  }

  async endSession(id: string): Promise<void> {
    await this.session(id).end();
  }

  async endAllSessions(): Promise<void> {
    await Promise.all([...this.sessionsById.values()].map((s) => s.end()));
  }

  private async closeIdleSessions(): Promise<void> {
    const limit = Date.now() - this.options.config.sessionTimeoutMinutes * 60_000;
    const idle = this.sessions().filter((s) => !s.busy && s.lastAccess.getTime() < limit);
    for (const session of idle) {
      this.log.append(`Closing idle R session ${session.id}\n`);
      this.emit({ kind: "session-reaped", id: session.id, user: session.subject });
    }
    await Promise.all(idle.map((s) => s.end()));
  }

  private onServerExit(server: RServerProcess): void {
    if (this.server !== server) return;
    this.server = undefined;
    this.log.append("R server process exited unexpectedly\n");
    this.emit({ kind: "server-crashed", autoRestart: this.options.config.autoRestart && !this.closed });
    void this.endAllSessions();
    void this.releaseSpares(this.spares.splice(0));
    if (this.options.config.autoRestart && !this.closed) this.scheduleRestart();
  }

  private scheduleRestart(): void {
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      void this.launch(true).catch(() => undefined);
    }, this.restartDelay);
  }

  private cancelRestart(): void {
    clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const next = this.transition.then(work);
    this.transition = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }
}

async function availableMemoryKb(): Promise<number> {
  try {
    const meminfo = await readFile("/proc/meminfo", "utf8");
    const match = /^MemAvailable:\s+(\d+)\s+kB/m.exec(meminfo);
    return match ? Number(match[1]) : -1;
  } catch {
    return -1;
  }
}

/** How many ended sessions' reasons are kept for later calls on them. */
const ENDED_REMEMBERED = 1000;

function remember(ended: Map<string, Fault>, id: string, fault: Fault): Fault {
  ended.set(id, fault);
  for (const oldest of ended.keys()) {
    if (ended.size <= ENDED_REMEMBERED) break;
    ended.delete(oldest);
  }
  return fault;
}

function sum(values: Iterable<number>): number {
  let total = 0;
  for (const v of values) total += v;
  return total;
}
