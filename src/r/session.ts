import type { EventSink, Outcome, RChild } from "./child.js";
import { CommandList, type CommandEntry } from "./commands.js";
import type { Owner } from "./confine/as-owner.js";
import { cpuSeconds } from "./confine/processes.js";
import type { Fault } from "../errors/fault.js";
import { rError, sessionEnded } from "./errors.js";
import { assignFrame, evalFrame, type AssignSource, type ValueFormat } from "./protocol.js";

/** A session's folders: `work` (its working directory), `tmp` (its tempdir()), both inside `home`. */
export interface SessionDirs {
  readonly home: string;
  readonly work: string;
  readonly tmp: string;
  /** Who owns them when the session is isolated: file operations in them run as that uid. */
  readonly owner?: Owner;
}

export interface SessionOptions {
  /** Interrupt an evaluation running longer than this; <= 0 disables. */
  readonly maxEvalSeconds: number;
  /** Interrupt an evaluation that used more CPU time than this; <= 0 disables. */
  readonly maxEvalCpuSeconds: number;
  /** After an interrupt the service sent, R has this long to answer before the session is killed. */
  readonly interruptGraceSeconds: number;
  /** Why the session's process ended when the kernel ended it (its memory); undefined: not that. */
  readonly endedBy?: () => Fault | undefined;
}

/** How often an evaluation's CPU time is read when it is limited. */
const CPU_CHECK_MS = 1000;

interface Job {
  run(): Promise<void>;
  /** Called instead of `run` when the session ends first. */
  drop(reason: Error): void;
}

function assignScript(symbol: string, source: AssignSource): string {
  return source.kind === "script"
    ? `${symbol} <- ${Buffer.from(source.text).toString("utf8")}`
    : `${symbol} <- unserialize(<${source.bytes.length} bytes>)`;
}

/** What a session tells of itself: the service answers it as a `Session` message. */
export interface SessionInfo {
  readonly id: string;
  /** The user who created it. */
  readonly subject: string;
  readonly busy: boolean;
  readonly createdAt: Date;
  readonly lastAccess: Date;
}

/**
 * A stateful R session: one forked R process whose operations (sync calls, commands, Execute) run one
 * at a time in submission order.
 */
export class RSession implements SessionInfo {
  readonly createdAt = new Date();
  lastAccess = this.createdAt;
  readonly commands: CommandList;
  private readonly queue: Job[] = [];
  private active = false;
  private ended = false;
  private endReason: Fault | undefined;
  private readonly endListeners: Array<() => void> = [];

  constructor(
    readonly id: string,
    readonly subject: string,
    readonly dirs: SessionDirs,
    private readonly child: RChild,
    private readonly options: SessionOptions,
    /** Ends whatever the session's process left (its other processes, its folders). */
    private readonly dispose: () => Promise<void>,
  ) {
    this.commands = new CommandList(id);
    child.onClose(() => void this.end());
  }

  get busy(): boolean {
    return this.active;
  }

  get closed(): boolean {
    return this.ended;
  }

  touch(): void {
    this.lastAccess = new Date();
  }

  onEnd(listener: () => void): void {
    if (this.ended) listener();
    else this.endListeners.push(listener);
  }

  /** The value of `script` (JSON text or R serialization bytes); an R error is an `invalid` fault. */
  async eval(script: Uint8Array, format: ValueFormat, sink?: EventSink, signal?: AbortSignal): Promise<Buffer> {
    return this.valueOf(await this.schedule(evalFrame(script, format, sink !== undefined), sink, signal));
  }

  async assign(symbol: string, source: AssignSource, signal?: AbortSignal): Promise<void> {
    this.valueOf(await this.schedule(assignFrame(symbol, source), undefined, signal));
  }

  submitEval(script: Uint8Array, format: ValueFormat): CommandEntry {
    const entry = this.commands.add(Buffer.from(script).toString("utf8"), format);
    this.submit(entry, evalFrame(script, format), true);
    return entry;
  }

  submitAssign(symbol: string, source: AssignSource): CommandEntry {
    const entry = this.commands.add(assignScript(symbol, source), undefined);
    this.submit(entry, assignFrame(symbol, source), false);
    return entry;
  }

  /** SIGINT to the running evaluation, if any; the session and its variables stay. */
  interrupt(): boolean {
    this.touch();
    return this.child.interrupt();
  }

  /** Kills the R process and everything it started, and removes the session's folders. */
  async end(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.child.kill();
    const reason = this.endedFault();
    for (const job of this.queue.splice(0)) job.drop(reason);
    for (const listener of this.endListeners.splice(0)) listener();
    await this.dispose();
  }

  /**
   * The service's own interrupt (the caller left, a time limit passed): R code can ignore SIGINT
   * (`tryCatch(…, interrupt = …)` in a loop), so a session whose evaluation does not end within the
   * grace time is ended. `running` is the outcome of the evaluation being stopped.
   */
  private stop(running: Promise<Outcome>): void {
    if (!this.child.interrupt()) return;
    const grace = setTimeout(() => void this.end(), Math.max(0, this.options.interruptGraceSeconds) * 1000);
    void running.finally(() => clearTimeout(grace));
  }

  private submit(entry: CommandEntry, frame: Buffer, withResult: boolean): void {
    this.touch();
    const session = this;
    this.enqueue({
      async run() {
        if (entry.deleted) return;
        entry.started();
        const outcome = await session.execute(frame);
        if (outcome.ok) entry.completed(withResult ? outcome.value : undefined);
        else entry.failed(outcome.ended ? session.endedFault().message : outcome.error);
      },
      drop(reason) {
        entry.failed(reason.message);
      },
    });
  }

  /** Runs `frame` when its turn comes; an abort before then removes it, during it interrupts R. */
  private schedule(frame: Buffer, sink?: EventSink, signal?: AbortSignal): Promise<Outcome> {
    this.touch();
    const session = this;
    return new Promise((resolve, reject) => {
      // Object methods, not named arrows (under tsx each named closure is also given its name, per
      // eval), and one abort listener for the job's whole life: queued, an abort takes it out of the
      // queue; running, it interrupts R.
      let running: Promise<Outcome> | undefined;
      const job: Job & { abort(): void } = {
        async run() {
          if (signal?.aborted) return reject(signal.reason);
          running = session.execute(frame, sink);
          try {
            resolve(await running);
          } finally {
            signal?.removeEventListener("abort", job.abort);
          }
        },
        drop(reason) {
          signal?.removeEventListener("abort", job.abort);
          reject(reason);
        },
        abort() {
          if (running) return session.stop(running);
          const index = session.queue.indexOf(job);
          if (index >= 0) {
            session.queue.splice(index, 1);
            reject(signal?.reason);
          }
        },
      };
      signal?.addEventListener("abort", job.abort, { once: true });
      this.enqueue(job);
    });
  }

  private async execute(frame: Buffer, sink?: EventSink): Promise<Outcome> {
    const { maxEvalSeconds, maxEvalCpuSeconds } = this.options;
    const running = this.child.run(frame, sink);
    const timer = maxEvalSeconds > 0 ? setTimeout(() => this.stop(running), maxEvalSeconds * 1000) : undefined;
    const cpuWatch = maxEvalCpuSeconds > 0 ? this.watchCpu(running, maxEvalCpuSeconds) : undefined;
    try {
      return await running;
    } finally {
      clearTimeout(timer);
      clearInterval(cpuWatch);
      this.touch();
    }
  }

  /** Stops `running` once the session process used `limit` more seconds of CPU than when it began. */
  private watchCpu(running: Promise<Outcome>, limit: number): NodeJS.Timeout {
    const pid = this.child.pid;
    const start = cpuSeconds(pid);
    const watch = setInterval(() => {
      void Promise.all([start, cpuSeconds(pid)]).then(([before, now]) => {
        if (before === undefined || now === undefined || now - before < limit) return;
        clearInterval(watch);
        this.stop(running);
      });
    }, CPU_CHECK_MS);
    return watch;
  }

  private valueOf(outcome: Outcome): Buffer {
    if (!outcome.ok) throw outcome.ended ? this.endedFault() : rError(outcome.error);
    return outcome.value;
  }

  /** Why the session ended, for every call that meets its end: its memory, when the kernel ended it for that. */
  private endedFault(): Fault {
    this.endReason ??= this.options.endedBy?.();
    return this.endReason ?? sessionEnded();
  }

  private enqueue(job: Job): void {
    if (this.ended) return job.drop(this.endedFault());
    this.queue.push(job);
    this.pump();
  }

  private pump(): void {
    if (this.active || this.ended) return;
    const job = this.queue.shift();
    if (!job) return;
    this.active = true;
    job.run().finally(() => {
      this.active = false;
      this.pump();
    });
  }
}
