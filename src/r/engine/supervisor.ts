import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { RConfig, SessionInstalls } from "../../config/config.js";
import type { ConsoleLog } from "../process/console-log.js";
import { stillStarting } from "./faults.js";
import { notRunning } from "../process/faults.js";
import { assertTrustedProfile } from "../process/profile.js";
import type { SessionNetwork } from "../confine/network/restricted.js";
import { RServerProcess } from "../process/rserver.js";
import type { EngineEvent } from "./events.js";

export interface SupervisorOptions {
  readonly config: RConfig;
  /** The R server's temporary folder lives in `<dataDir>/rserver-tmp`. */
  readonly dataDir: string;
  readonly isolated: boolean;
  readonly log: ConsoleLog;
  /** A package library searched before R's own (see REngineOptions.library). */
  readonly library?: string;
  /** See REngineOptions.sessionInstalls. */
  readonly sessionInstalls?: SessionInstalls;
  /** See REngineOptions.repos. */
  readonly repos?: readonly string[];
  /** See REngineOptions.network. */
  readonly network?: SessionNetwork;
  readonly emit: (event: EngineEvent) => void;
  /** Runs once, before the first start: what a previous run of the service left behind goes. */
  readonly cleanup: () => Promise<void>;
  /** A server started: sessions can be forked from it. */
  readonly started: (server: RServerProcess) => void;
  /** The running server exited on its own: its sessions and spares are gone with it. */
  readonly lost: () => void;
}

const MAX_RESTART_DELAY_MS = 30_000;

/**
 * The R server process: its start and stop, one at a time; its restart after a crash, the delay
 * doubling after each failed attempt; and the calls that wait for a start under way.
 */
export class RServerSupervisor {
  private current: RServerProcess | undefined;
  private rVersion = "";
  /** Start and stop run one at a time. */
  private transition: Promise<void> = Promise.resolve();
  private restartTimer: NodeJS.Timeout | undefined;
  private restartDelay = 1000;
  private ended = false;
  /** Runs once, before the first start. */
  private cleaned: Promise<void> | undefined;
  /** Starts under way (queued or running); with a scheduled restart, calls that need R wait for them. */
  private starts = 0;
  /** Calls waiting for a start to end. */
  private readonly waiters = new Set<() => void>();

  constructor(private readonly options: SupervisorOptions) {}

  /** The server started last, until it is stopped or its exit is noticed. */
  get server(): RServerProcess | undefined {
    return this.current;
  }

  get running(): boolean {
    return this.current?.running ?? false;
  }

  /** `major.minor` of R; empty until the R server has started once. */
  get version(): string {
    return this.rVersion;
  }

  /** Closed for good: nothing starts any more. */
  get closed(): boolean {
    return this.ended;
  }

  /** Starts the R server process; nothing happens when it runs already. */
  start(): Promise<void> {
    return this.launch(false);
  }

  /**
   * Stops the R server: once no caller can get it any more, `around` runs and is handed the stop of
   * the server process itself, so that it ends what must end before and after; all as one transition.
   */
  stop(around: (stopServer: () => Promise<void>) => Promise<void>): Promise<void> {
    return this.serially(async () => {
      this.cancelRestart();
      const server = this.current;
      this.current = undefined;
      this.wakeWaiters();
      await around(async () => {
        await server?.stop();
        if (server) this.options.emit({ kind: "server-stopped" });
      });
    });
  }

  /** Nothing starts or restarts any more (the caller then stops). */
  close(): void {
    this.ended = true;
  }

  /**
   * The running R server. While it starts (the service's own start, a restart after a crash, PUT
   * /rserver) a caller waits up to r.startWaitSeconds and is then told to come back (503): R will be
   * there, a 500 would say it is broken. Stopped for good (an administrator, a failed start): 500.
   */
  async serverFor(signal?: AbortSignal): Promise<RServerProcess> {
    const deadline = Date.now() + Math.max(0, this.options.config.startWaitSeconds) * 1000;
    for (;;) {
      const server = this.current;
      if (server?.running) return server;
      if (this.starts === 0 && this.restartTimer === undefined) throw notRunning();
      signal?.throwIfAborted();
      const left = deadline - Date.now();
      if (left <= 0) throw stillStarting();
      await this.stateChange(left, signal);
    }
  }

  /** A start; `restarting` after a crash, when a failure schedules the next attempt. */
  private async launch(restarting: boolean): Promise<void> {
    const { emit, log } = this.options;
    this.starts++;
    try {
      const started = await this.serially(() => this.spawnServer());
      if (started) emit({ kind: "server-started", restart: restarting, version: this.rVersion });
      if (restarting) this.restartDelay = 1000;
    } catch (error) {
      emit({ kind: "server-start-failed", restart: restarting, error: (error as Error).message });
      if (restarting && !this.ended && !this.running) {
        log.append(`R server restart failed: ${(error as Error).message}\n`);
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
    if (this.ended || this.running) return false;
    this.cancelRestart();
    await (this.cleaned ??= this.options.cleanup());
    const tmpDir = join(this.options.dataDir, "rserver-tmp");
    const { library, config, log } = this.options;
    const { profile } = config;
    await Promise.all([mkdir(tmpDir, { recursive: true, mode: 0o700 }), library ? mkdir(library, { recursive: true }) : undefined]);
    if (profile) await assertTrustedProfile(profile);
    const server = await RServerProcess.start({
      executable: config.executable,
      log: (text) => log.append(text),
      tmpDir,
      isolated: this.options.isolated,
      setupLibrary: config.setupLibrary,
      ...(library ? { library } : {}),
      ...(profile ? { profile } : {}),
      ...(this.options.sessionInstalls ? { sessionInstalls: this.options.sessionInstalls } : {}),
      ...(this.options.repos ? { repos: this.options.repos } : {}),
      ...(this.options.network?.policy === "restricted" ? { router: this.options.network.links } : {}),
    });
    this.current = server;
    this.rVersion = server.version;
    server.onExit(() => this.onServerExit(server));
    this.options.started(server);
    return true;
  }

  private onServerExit(server: RServerProcess): void {
    if (this.current !== server) return;
    this.current = undefined;
    const autoRestart = this.options.config.autoRestart && !this.ended;
    this.options.log.append("R server process exited unexpectedly\n");
    this.options.emit({ kind: "server-crashed", autoRestart });
    this.options.lost();
    if (autoRestart) this.scheduleRestart();
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
