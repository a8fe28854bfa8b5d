import { readFile } from "node:fs/promises";
import { cpus } from "node:os";
import { join } from "node:path";
import type { RConfig, SessionInstalls } from "../../config/config.js";
import type { ConsoleLog } from "../process/console-log.js";
import { noSuchSession, outOfMemory } from "./faults.js";
import { notRunning } from "../process/faults.js";
import type { Fault } from "../../errors/fault.js";
import type { SessionNetwork } from "../confine/network/restricted.js";
import type { SessionQuota, SessionQuotas } from "../confine/quotas.js";
import type { ValueFormat } from "../wire/protocol.js";
import type { RServerProcess } from "../process/rserver.js";
import type { SessionStart } from "../session/life.js";
import { RSession } from "../session/session.js";
import type { EngineEvent } from "./events.js";
import { type Fork, processOf, SessionHomes } from "./homes.js";
import { IdleSweeps } from "./idle-sweeps.js";
import { PeerSignals } from "./peer-signals.js";
import { probe } from "./probe.js";
import { type ShareInstalls, SharedInstalls } from "../packages/shared-installs.js";
import { SessionRecords } from "./records.js";
import { SessionLimits } from "./session-limits.js";
import { SparePool } from "./spares.js";
import { RServerSupervisor } from "./supervisor.js";
import { Suspension, suspendedMaxBytes } from "./suspension.js";

export type { EngineEvent } from "./events.js";

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
  /** Isolated sessions' network (r.sessionNetwork as it could be had); the host's by default. */
  readonly network?: SessionNetwork;
  /** A control group per session (isolated sessions, where the host allows): memory, CPU, processes. */
  readonly quotas?: SessionQuotas;
  /** Makes a session's id; default: a random UUID. (A cluster's ids name their node.) */
  readonly newSessionId?: () => string;
  /** Told what happens to the R server and its sessions (the service log and metrics listen). */
  readonly onEvent?: (event: EngineEvent) => void;
  /**
   * packages.sessionInstalls: sessions get a library of their own, first in their `.libPaths()`,
   * unless `none` (then install.packages() refuses); unset: neither.
   */
  readonly sessionInstalls?: SessionInstalls;
  /** packages.repos: what sessions install from when they name no repository; unset or empty: R's own. */
  readonly repos?: readonly string[];
  /**
   * How a session's installs are shared with every session, for a session whose owner may install
   * for all (createSession's `installsForAll`) when packages.sessionInstalls is `auto`; unset: never.
   */
  readonly shareInstalls?: (id: string, subject: string) => ShareInstalls;
}

export interface EngineStatus {
  readonly running: boolean;
  /** `major.minor` of R, e.g. "4.2.2"; empty until the R server has started once. */
  readonly version: string;
  readonly sessions: {
    readonly total: number;
    readonly busy: number;
    /** Sessions whose state is saved and whose process ended (they hold no memory). */
    readonly suspended: number;
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

/**
 * The R server process and the sessions forked from it: the server's supervision (engine/supervisor.ts),
 * sessions' homes (engine/homes.ts), the spares forked ahead (engine/spares.ts), the limits on sessions
 * (engine/session-limits.ts) and what their idle time leads to (engine/idle-sweeps.ts) put together,
 * with the open sessions.
 */
export class REngine {
  readonly log: ConsoleLog;
  private readonly supervisor: RServerSupervisor;
  private readonly homes: SessionHomes;
  private readonly pool: SparePool;
  private readonly sessionsById = new Map<string, RSession>();
  private readonly limits: SessionLimits;
  private readonly suspension: Suspension;
  private readonly sweeps: IdleSweeps;
  /** Sessions of an earlier run of the service that came back (their folders stay at its first start). */
  private readonly restored = new Set<string>();
  /** Sessions of an earlier run whose saved state was gone when this one started. */
  private readonly lostAtStart: string[] = [];
  /** Concurrent Checks share one probe. */
  private checking: Promise<boolean> | undefined;
  private readonly emit: (event: EngineEvent) => void;
  /** Open sessions' control groups (with quotas), for what they use. */
  private readonly quotaOf = new Map<string, SessionQuota>();
  /** Sessions the kernel ended for their memory, and how to say it, the latest ENDED_REMEMBERED. */
  private readonly endedSessions = new Map<string, Fault>();
  /** Sessions whose process ended on its own and that were not deleted since, with their owners, the latest ENDED_REMEMBERED. */
  private readonly lostSessions = new Map<string, string>();
  /** What a session may do to its owner's other sessions' processes. */
  private readonly peers = new PeerSignals({ session: (id) => this.sessionsById.get(id), serverPid: () => this.serverPid });

  /** The network sessions have: r.sessionNetwork as it could be had. */
  get sessionNetwork(): SessionNetwork["policy"] {
    return this.options.network?.policy ?? "host";
  }

  constructor(private readonly options: REngineOptions) {
    this.log = options.log;
    const emit = (this.emit = options.onEvent ?? (() => {}));
    this.homes = new SessionHomes({
      ...options,
      sessionLibraries: options.sessionInstalls !== undefined && options.sessionInstalls !== "none",
      // A session's end finished: its uid and its place under r.maxSessions are free for a spare.
      ended: () => this.pool.fill(),
    });
    this.limits = new SessionLimits({ ...options, homes: this.homes, sessions: this.sessionsById });
    this.supervisor = new RServerSupervisor({
      ...options,
      emit,
      cleanup: () => this.removeLeftovers(),
      started: () => this.pool.fill(),
      lost: () => {
        void this.endAllSessions();
        void this.pool.release(this.pool.takeAll());
      },
    });
    this.pool = new SparePool({
      homes: this.homes,
      server: () => (this.supervisor.closed ? undefined : this.supervisor.server),
      target: () => this.limits.spareTarget(),
      emit,
    });
    this.suspension = new Suspension({
      config: options.config,
      homes: this.homes,
      records: new SessionRecords(join(options.dataDir, "r-sessions")),
      server: () => this.supervisor.serverFor(),
      freeUid: async () => {
        const spare = this.pool.take();
        if (spare) await this.homes.release(await spare);
      },
      sessions: () => this.sessions(),
      onProcess: (id, fork) => {
        if (fork?.quota) this.quotaOf.set(id, fork.quota);
        else this.quotaOf.delete(id);
        this.peers.track(id, fork);
      },
      // Its uid and its place under r.maxSessions are free again: a spare can take them.
      freed: () => this.pool.fill(),
      emit,
      maxBytes: suspendedMaxBytes(options.config.suspendedMaxMb, options.dataDir),
    });
    this.sweeps = new IdleSweeps({ ...options, emit, sessions: () => this.sessions(), sweep: () => this.suspension.sweep() });
  }

  get running(): boolean {
    return this.supervisor.running;
  }

  /** The R server's process id (also its process group) while it runs. */
  get serverPid(): number | undefined {
    return this.supervisor.server?.pid;
  }

  /**
   * Lists again, suspended, the sessions an earlier run of the service saved (at its stop, or a
   * checkpoint before it crashed); before boot(), whose first start removes what else it left.
   */
  async restoreSessions(): Promise<void> {
    const { found, lost } = await this.suspension.restorable();
    for (const { record, start } of found) {
      this.restored.add(record.id);
      this.addSession(record.id, record.subject, start, undefined, record.installsForAll === true);
    }
    this.lostAtStart.push(...lost);
  }

  /** Starts the R server process when the configuration asks for it at service start. */
  async boot(): Promise<void> {
    if (this.options.config.startOnBoot) await this.start();
  }

  /** Starts the R server process; nothing happens when it runs already. */
  start(): Promise<void> {
    return this.supervisor.start();
  }

  /** Stops the R server process and ends every session; nothing happens when it is stopped. */
  stop(): Promise<void> {
    return this.supervisor.stop(async (stopServer) => {
      const spares = this.pool.takeAll();
      await this.endAllSessions();
      await stopServer();
      // Only now: a spare still forking is abandoned by the stop instead of being waited for.
      await this.pool.release(spares);
    });
  }

  /**
   * Stops everything for good (shutdown, tests): every session is suspended first (what is queued
   * fails, a running evaluation is interrupted), so that the next start with the same data folder
   * lists it again; a session whose state cannot be saved ends, or keeps its last saved state.
   */
  async close(): Promise<void> {
    this.supervisor.close();
    this.sweeps.stop();
    const sessions = this.sessions();
    await Promise.all(sessions.map((s) => (s.suspended ? undefined : this.suspension.suspend(s, "stop").catch(() => undefined))));
    // Saved, they are the next start's: not ended with the R server.
    for (const s of sessions) if (s.suspended) this.sessionsById.delete(s.id);
    await this.stop();
    await this.homes.stopEnding();
  }

  /** Suspends the session at once (after what it runs and has queued); rejects when its state cannot be saved. */
  suspendSession(session: RSession): Promise<void> {
    return this.suspension.suspend(session, "asked");
  }

  async status(): Promise<EngineStatus> {
    const running = this.running;
    const sessions = [...this.sessionsById.values()];
    const { quotas } = this.options;
    const usage = quotas
      ? [...this.quotaOf].map(([id, q]) => ({ id, memoryBytes: q.group.memoryBytes(), cpuSeconds: q.group.cpuSeconds() }))
      : undefined;
    return {
      running,
      version: this.supervisor.version,
      sessions: {
        total: sessions.length,
        busy: sessions.filter((s) => s.busy).length,
        suspended: sessions.filter((s) => s.suspended).length,
        ...(quotas && usage ? { memoryBytes: quotas.memoryBytes(), cpuSeconds: quotas.cpuSeconds(), usage } : {}),
      },
      cores: running ? cpus().length : -1,
      freeMemory: running ? await availableMemoryKb() : -1,
    };
  }

  /** Whether the R server runs and a session can be served (engine/probe.ts); concurrent Checks share one probe. */
  check(): Promise<boolean> {
    this.checking ??= probe(this.supervisor.server, this.pool, this.homes).finally(() => (this.checking = undefined));
    return this.checking;
  }

  /** R.version, as JSON text or R serialization; `signal`: the caller left (see RServerSupervisor.serverFor). */
  async rVersion(format: ValueFormat, signal?: AbortSignal): Promise<Buffer> {
    const server = await this.supervisor.serverFor(signal);
    return server.versionValue(format);
  }

  /**
   * A new session for `subject`; `signal`: the caller left (see RServerSupervisor.serverFor);
   * `installsForAll`: its owner may install packages for every session (packages.sessionInstalls).
   */
  async createSession(subject: string, signal?: AbortSignal, installsForAll = false): Promise<RSession> {
    const server = await this.supervisor.serverFor(signal);
    return this.limits.admit(subject, () => this.openSession(server, subject, installsForAll));
  }

  /** Whether a session runs or has queued an operation (an async command too). */
  get busy(): boolean {
    return this.sessions().some((s) => s.busy);
  }

  /** The session, or NotFound (or, for a session its memory limit ended, that). */
  session(id: string): RSession {
    const session = this.sessionsById.get(id);
    if (!session) throw this.endedSessions.get(id) ?? noSuchSession(id);
    return session;
  }

  /**
   * Ends session `id` for its owner's DELETE, once `allowed(owner)` returned (it throws when the caller
   * may not). Returns once no call can reach it: what it ran or had queued has failed and its process
   * was sent SIGKILL; the rest of its end (its processes reaped, its folders removed, its group
   * released, engine/homes.ts) goes on after the answer, as Rserve's close waits for none of it (issue
   * 40; BENCH_ONLY=r, R sessions), its place under r.maxSessions and its uid held until then.
   * A session whose process ended on its own (ended from another of its owner's sessions, quit(), R
   * crashed) has already ended, but Rock keeps such a session until it is deleted, and clients end a
   * busy session that way and then delete it: its first DELETE is answered as an open session's, and
   * ends nothing more.
   */
  async deleteSession(id: string, allowed: (owner: string) => void): Promise<void> {
    const lostOwner = this.lostSessions.get(id);
    if (lostOwner !== undefined) {
      allowed(lostOwner);
      this.lostSessions.delete(id);
      return;
    }
    const session = this.session(id);
    allowed(session.subject);
    session.end().catch((error: unknown) => this.log.append(`R session ${id} could not be ended: ${String(error)}\n`));
  }

  sessions(): RSession[] {
    return [...this.sessionsById.values()];
  }

  async endAllSessions(): Promise<void> {
    await Promise.all([...this.sessionsById.values()].map((s) => s.end()));
  }

  private async openSession(server: RServerProcess, subject: string, installsForAll: boolean): Promise<RSession> {
    const fork = await this.pool.forkFor(server);
    if (this.supervisor.server !== server) {
      // The server stopped meanwhile: its process group, this child included, is gone or going.
      await this.homes.release(fork);
      throw notRunning();
    }
    const session = this.addSession(fork.id, subject, { process: processOf(fork) }, fork, installsForAll);
    this.emit({ kind: "session-opened", id: fork.id, user: subject });
    return session;
  }

  /** A session among the open ones, with a process (`fork`) or suspended. */
  private addSession(id: string, subject: string, start: SessionStart, fork: Fork | undefined, installsForAll: boolean): RSession {
    const { maxEvalSeconds, maxEvalCpuSeconds, interruptGraceSeconds } = this.options.config;
    const host = this.suspension.host(id, subject, fork);
    // A session the kernel ended for its memory says so, to its running call and to every later one.
    const endedBy = (): Fault | undefined => {
      const reason = this.quotaOf.get(id)?.endedBy();
      if (reason === undefined) return undefined;
      this.emit({ kind: "session-out-of-memory", id, user: subject, reason });
      return remember(this.endedSessions, id, outOfMemory(reason));
    };
    const folders = this.homes.folders(id);
    const share = installsForAll && this.options.sessionInstalls === "auto" ? this.options.shareInstalls?.(id, subject) : undefined;
    const installs = share ? { installs: new SharedInstalls(folders.library, share) } : {};
    const session = new RSession(
      id,
      subject,
      folders,
      start,
      { maxEvalSeconds, maxEvalCpuSeconds, interruptGraceSeconds, endedBy, installsForAll, ...installs },
      host,
    );
    this.sessionsById.set(id, session);
    session.onEnd(() => {
      this.sessionsById.delete(id);
      // One the kernel ended for its memory says so instead.
      if (session.lostProcess && !this.endedSessions.has(id)) remember(this.lostSessions, id, subject);
      this.emit({ kind: "session-closed", id, user: subject });
    });
    return session;
  }

  /**
   * What the previous run of the service left when it ended without cleaning up (engine/homes.ts),
   * but the folders of the sessions that came back; says which sessions came back and which ended.
   */
  private async removeLeftovers(): Promise<void> {
    const ended = [...new Set([...this.lostAtStart, ...(await this.homes.removeLeftovers(this.restored))])];
    if (this.restored.size > 0 || ended.length > 0) this.emit({ kind: "sessions-restored", restored: [...this.restored], ended });
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

function remember<T>(ended: Map<string, T>, id: string, what: T): T {
  ended.set(id, what);
  for (const oldest of ended.keys()) {
    if (ended.size <= ENDED_REMEMBERED) break;
    ended.delete(oldest);
  }
  return what;
}
