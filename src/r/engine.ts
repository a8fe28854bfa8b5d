import { randomUUID } from "node:crypto";
import { readFile, mkdir, rm } from "node:fs/promises";
import { cpus } from "node:os";
import { join } from "node:path";
import type { RConfig } from "../config/config.js";
import type { ConsoleLog } from "./console-log.js";
import { noSuchSession, notRunning } from "./errors.js";
import type { ValueFormat } from "./negotiate.js";
import { RServerProcess } from "./rserver.js";
import { RSession } from "./session.js";

export interface REngineOptions {
  readonly config: RConfig;
  /** Sessions' folders live in `<dataDir>/sessions/<id>`. */
  readonly dataDir: string;
  readonly log: ConsoleLog;
}

export interface EngineStatus {
  readonly running: boolean;
  /** `major.minor` of R, e.g. "4.2.2"; empty until the R server has started once. */
  readonly version: string;
  readonly sessions: { readonly total: number; readonly busy: number };
  /** -1 while the R server is stopped. */
  readonly cores: number;
  /** Available host memory in KB; -1 while the R server is stopped. */
  readonly freeMemory: number;
}

const MAX_RESTART_DELAY_MS = 30_000;

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

  constructor(private readonly options: REngineOptions) {
    this.log = options.log;
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
    return this.serially(async () => {
      if (this.closed || this.running) return;
      clearTimeout(this.restartTimer);
      const tmpDir = join(this.options.dataDir, "rserver-tmp");
      await mkdir(tmpDir, { recursive: true });
      const server = await RServerProcess.start({
        executable: this.options.config.executable,
        log: (text) => this.log.append(text),
        tmpDir,
      });
      this.server = server;
      this.version = server.version;
      server.onExit(() => this.onServerExit(server));
    });
  }

  /** Stops the R server process and ends every session; nothing happens when it is stopped. */
  stop(): Promise<void> {
    return this.serially(async () => {
      clearTimeout(this.restartTimer);
      const server = this.server;
      this.server = undefined;
      await this.endAllSessions();
      await server?.stop();
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
    return {
      running,
      version: this.version,
      sessions: { total: sessions.length, busy: sessions.filter((s) => s.busy).length },
      cores: running ? cpus().length : -1,
      freeMemory: running ? await availableMemoryKb() : -1,
    };
  }

  /** True when the R server answers on its socket (a session can be forked from it). */
  async check(): Promise<boolean> {
    const server = this.server;
    if (!server?.running) return false;
    try {
      await server.ping();
      return true;
    } catch {
      return false;
    }
  }

  /** R.version, as JSON text or R serialization. */
  async rVersion(format: ValueFormat): Promise<Buffer> {
    const server = this.server;
    if (!server?.running) throw notRunning();
    return server.versionValue(format);
  }

  async createSession(subject: string): Promise<RSession> {
    const server = this.server;
    if (!server?.running) throw notRunning();
    const id = randomUUID();
    const home = join(this.options.dataDir, "sessions", id);
    const dirs = { home, work: join(home, "work"), tmp: join(home, "tmp") };
    await mkdir(dirs.work, { recursive: true });
    await mkdir(dirs.tmp, { recursive: true });
    let child;
    try {
      child = await server.fork(dirs.work, dirs.tmp);
    } catch (error) {
      await rm(home, { recursive: true, force: true });
      throw error;
    }
    const session = new RSession(id, subject, dirs, child, { maxEvalSeconds: this.options.config.maxEvalSeconds });
    this.sessionsById.set(id, session);
    session.onEnd(() => this.sessionsById.delete(id));
    return session;
  }

  /** The session, or NotFound. */
  session(id: string): RSession {
    const session = this.sessionsById.get(id);
    if (!session) throw noSuchSession(id);
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
    for (const session of idle) this.log.append(`Closing idle R session ${session.id}\n`);
    await Promise.all(idle.map((s) => s.end()));
  }

  private onServerExit(server: RServerProcess): void {
    if (this.server !== server) return;
    this.server = undefined;
    this.log.append("R server process exited unexpectedly\n");
    void this.endAllSessions();
    if (this.options.config.autoRestart && !this.closed) this.scheduleRestart();
  }

  private scheduleRestart(): void {
    this.restartTimer = setTimeout(() => {
      this.start().then(
        () => (this.restartDelay = 1000),
        (error: Error) => {
          this.log.append(`R server restart failed: ${error.message}\n`);
          this.restartDelay = Math.min(this.restartDelay * 2, MAX_RESTART_DELAY_MS);
          if (!this.closed && !this.running) this.scheduleRestart();
        },
      );
    }, this.restartDelay);
  }

  private serially(work: () => Promise<void>): Promise<void> {
    const next = this.transition.then(work);
    this.transition = next.catch(() => undefined);
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
