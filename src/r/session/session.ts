import { Channel } from "../../channel.js";
import type { EventSink, Outcome, RChild, ValueSink } from "../process/child.js";
import { CommandList, type CommandEntry } from "./commands.js";
import type { Owner } from "../confine/as-owner.js";
import { cpuSeconds } from "../confine/processes.js";
import type { Fault } from "../../errors/fault.js";
import { sessionEnded } from "../process/faults.js";
import { rError, sessionNotSaved } from "./faults.js";
import { assignFrame, evalFrame, pipedEvalFrame, saveFrame, type AssignSource, type ValueFormat } from "../wire/protocol.js";
import { AnswerPipe } from "../wire/value-pipe.js";

/**
 * A session's folders: `work` (its working directory), `tmp` (its tempdir()) and `library` (the
 * package library it installs into, first in its `.libPaths()`, when packages.sessionInstalls allows
 * installs), all inside `home`.
 */
export interface SessionFolders {
  readonly home: string;
  readonly work: string;
  readonly tmp: string;
  readonly library: string;
  /** The file its state is saved into by its own process (src/r/process/session-state.R), in `home`. */
  readonly state: string;
}

/** A session's folders as its process sees them now. */
export interface SessionDirs extends SessionFolders {
  /** Who owns them when the session is isolated: file operations in them run as that uid. */
  readonly owner?: Owner;
}

/** A process of a session: the R process forked for it, its uid when isolated. */
export interface SessionProcess {
  readonly child: RChild;
  readonly owner?: Owner;
}

/**
 * Where a session's processes come from and go (the engine's homes): a session lives on without a
 * process once its state is saved (suspended), and gets a new one on its next call.
 */
export interface SessionHost {
  /** A new process of the session with its saved state restored into it; rejects with why not. */
  resume(): Promise<SessionProcess>;
  /** Ends the process and what it started, and frees its uid; the folders stay, the state in them. */
  release(process: SessionProcess): Promise<void>;
  /** The session's state file is in place: it is recorded, with what could not be saved. */
  saved(session: RSession, lost: readonly string[]): Promise<void>;
  /** Ends whatever the session left (its process's others, its folders, its saved state). */
  dispose(process: SessionProcess | undefined): Promise<void>;
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
  /** Its owner may install packages for every session (kept in its record while it is suspended). */
  readonly installsForAll?: boolean;
  /** What follows each run: the packages it installed shared with every session (SharedInstalls). */
  readonly installs?: { after(owner: Owner | undefined): Promise<void> | undefined };
}

/** Where what R sends while a job runs goes: a live evaluation's events, a value streamed in pieces. */
interface Receivers {
  readonly events?: EventSink;
  readonly value?: ValueSink;
}

/**
 * Pieces of a streamed value (up to 64 KiB each, a socket read) waiting for the client before R is no
 * longer read: with them in flight, R's socket and the client's keep both sides busy.
 */
const VALUE_PIECES = 16;

/** How often an evaluation's CPU time is read when it is limited. */
const CPU_CHECK_MS = 1000;

interface Job {
  /** The service's own work on the session's state: runs as it is, suspended or not. */
  readonly own?: true;
  run(): Promise<void>;
  /** Called instead of `run` when the session ends first, or its process could not be resumed. */
  drop(reason: Error): void;
}

function assignScript(symbol: string, source: AssignSource): string {
  if (source.kind === "script") return `${symbol} <- ${Buffer.from(source.text).toString("utf8")}`;
  return `${symbol} <- unserialize(<${source.kind === "rdata" ? `${source.bytes.length} bytes` : "streamed"}>)`;
}

/**
 * What a job sends R: a frame, or one made when the job's turn comes and undone once R answered (a
 * streamed assign's pipe is made then, in the folder as the process reading it owns it).
 */
type Request = Buffer | { open(dirs: SessionDirs): Promise<Buffer>; close(): Promise<void> };

function assignRequest(symbol: string, source: AssignSource): Request {
  if (source.kind !== "stream") return assignFrame(symbol, source);
  const { feed } = source;
  return {
    open: async (dirs) => assignFrame(symbol, { kind: "stream", path: await feed.open(dirs) }),
    close: () => feed.close(),
  };
}

/** The answer of a run whose installs could not be shared: the caller must not count on them. */
function notShared(error: unknown): Outcome {
  const why = error instanceof Error ? error.message : String(error);
  return { ok: false, error: `Error: the packages installed could not be shared with other sessions: ${why}` };
}

/** Undoes what a request made, or would have: it will not run. */
function release(request: Request): void {
  if (!Buffer.isBuffer(request)) void request.close();
}

/** What a session tells of itself: the service answers it as a `Session` message. */
export interface SessionInfo {
  readonly id: string;
  /** The user who created it. */
  readonly subject: string;
  readonly busy: boolean;
  /** Its state saved and its process ended: the next call resumes it. */
  readonly suspended: boolean;
  readonly createdAt: Date;
  readonly lastAccess: Date;
}

/** What a session starts from: a new process, or (suspended) its state saved by an earlier one. */
export type SessionStart =
  | { readonly process: SessionProcess }
  | { readonly createdAt: Date; readonly lastAccess: Date; readonly savedAt: Date; readonly commands?: CommandList };

/**
 * A stateful R session: one forked R process whose operations (sync calls, commands, Execute) run one
 * at a time in submission order. Its state can be saved by its process (a checkpoint) and its process
 * ended (suspended): the next operation that needs R first resumes it in a new process.
 */
export class RSession implements SessionInfo {
  readonly createdAt: Date;
  lastAccess: Date;
  readonly commands: CommandList;
  private process: SessionProcess | undefined;
  /** When its state was last saved whole; undefined: never. */
  private saved: Date | undefined;
  /** R ran something since the state was last saved (or restored). */
  private changed = false;
  private readonly queue: Job[] = [];
  private active = false;
  private ended = false;
  /** Its process ended on its own, not by the service. */
  private lost = false;
  private endReason: Fault | undefined;
  private readonly endListeners: Array<() => void> = [];
  /** Why the service stopped the session (shutDown): what it was running failed for that. */
  private stopping: Error | undefined;
  /** At a stop, gives up an evaluation that ignores its interrupt. */
  private abandonTimer: NodeJS.Timeout | undefined;
  /** File operations under way: the process is not suspended under them. */
  private users = 0;
  private usersGone: (() => void) | undefined;

  constructor(
    readonly id: string,
    readonly subject: string,
    private readonly folders: SessionFolders,
    start: SessionStart,
    private readonly options: SessionOptions,
    private readonly host: SessionHost,
  ) {
    if ("process" in start) {
      this.createdAt = new Date();
      this.lastAccess = this.createdAt;
      this.commands = new CommandList(id);
      this.adopt(start.process);
    } else {
      this.createdAt = start.createdAt;
      this.lastAccess = start.lastAccess;
      this.saved = start.savedAt;
      this.commands = start.commands ?? new CommandList(id);
    }
  }

  get busy(): boolean {
    return this.active;
  }

  /** Its owner may install packages for every session (packages.sessionInstalls). */
  get installsForAll(): boolean {
    return this.options.installsForAll === true;
  }

  get closed(): boolean {
    return this.ended;
  }

  /** It ended because its process ended on its own (killed from outside, quit(), R crashed), not by the service. */
  get lostProcess(): boolean {
    return this.lost;
  }

  get suspended(): boolean {
    return this.process === undefined && !this.ended;
  }

  /** When the state was last saved whole; undefined: never. */
  get savedAt(): Date | undefined {
    return this.saved;
  }

  /** R ran something since its state was last saved. */
  get unsaved(): boolean {
    return this.changed || this.saved === undefined;
  }

  /** Its folders, with the uid that owns them while it has a process. */
  get dirs(): SessionDirs {
    const owner = this.process?.owner;
    return owner ? { ...this.folders, owner } : this.folders;
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
    return this.valueOf(await this.schedule(evalFrame(script, format, sink !== undefined), { events: sink }, signal));
  }

  /**
   * The value of `script` in pieces as R sends them: a large one is never gathered whole (what comes
   * in one read is one piece), and a large R serialization is never made whole in R either (it comes
   * through the session's value pipe). R is read no faster than the pieces are taken. Rejects before
   * the first piece as `eval` does.
   */
  evalStream(script: Uint8Array, format: ValueFormat, signal?: AbortSignal): AsyncIterable<Buffer> {
    let resume: (() => void) | undefined;
    // Made when R says it writes into the pipe: a small value, the common case, comes in its answer.
    let answer: AnswerPipe | undefined;
    const pieces: Channel<Buffer> = new Channel<Buffer>({
      capacity: VALUE_PIECES,
      overflow: "pause",
      onDrain: () => {
        resume?.();
        answer?.resume();
      },
      signal,
    });
    // A closed channel takes and drops: R is read to its end.
    const take = (bytes: Buffer): boolean => pieces.push(bytes) || pieces.closed;
    const value: ValueSink = {
      write(bytes, resumeR) {
        resume = resumeR;
        return take(bytes);
      },
      pipe: () => {
        answer = new AnswerPipe(take);
        answer.open(this.dirs);
      },
    };
    const request = format === "rds" ? this.pipedRequest(script, () => answer) : evalFrame(script, format);
    this.schedule(request, { value }, signal)
      .then(async (outcome) => {
        // What came whole in one read was gathered: one piece.
        const whole = this.valueOf(outcome);
        if (whole.length > 0) pieces.push(whole);
        await answer?.ended().catch((error: unknown) => {
          throw rError(error instanceof Error ? error.message : String(error));
        });
        pieces.close();
      })
      .catch((error: unknown) => {
        answer?.drop();
        pieces.fail(error);
      });
    return pieces;
  }

  /**
   * An R-serialized answer that R may write into the session's value pipe (`answer()`, once R said so):
   * the job ends once R's writing did.
   */
  private pipedRequest(script: Uint8Array, answer: () => AnswerPipe | undefined): Request {
    const frame = pipedEvalFrame(script);
    return {
      open: () => Promise.resolve(frame),
      // Its failure is the answer's (evalStream).
      close: () => {
        const piped = answer();
        if (!piped) return Promise.resolve();
        piped.answer();
        return piped.ended().catch(() => undefined);
      },
    };
  }

  async assign(symbol: string, source: AssignSource, signal?: AbortSignal): Promise<void> {
    this.valueOf(await this.schedule(assignRequest(symbol, source), undefined, signal));
  }

  submitEval(script: Uint8Array, format: ValueFormat): CommandEntry {
    const entry = this.commands.add(Buffer.from(script).toString("utf8"), format);
    this.submit(entry, evalFrame(script, format), true);
    return entry;
  }

  submitAssign(symbol: string, source: AssignSource): CommandEntry {
    const entry = this.commands.add(assignScript(symbol, source), undefined);
    this.submit(entry, assignRequest(symbol, source), false);
    return entry;
  }

  /**
   * The session's folders as its process owns them (resumed first when suspended), for a file
   * operation: the session is not suspended before `done()` is called.
   */
  async useFiles(): Promise<{ readonly dirs: SessionDirs; done(): void }> {
    this.touch();
    // Counted once resumed, not before: a suspend queued ahead waits for the uses to end, and the
    // resume is queued behind it.
    if (!this.process) await this.awaken();
    this.users++;
    let done = false;
    const release = (): void => {
      if (done) return;
      done = true;
      if (--this.users === 0) this.usersGone?.();
    };
    return { dirs: this.dirs, done: release };
  }

  /** SIGINT to the running evaluation, if any; the session and its variables stay. */
  interrupt(): boolean {
    this.touch();
    return this.process?.child.interrupt() ?? false;
  }

  /**
   * Saves the state when R changed it since the last save (a checkpoint), the process living on;
   * after what is queued. Rejects when R could not save it (the session lives on as it was).
   */
  checkpoint(): Promise<void> {
    return this.own(async () => {
      if (this.process && this.unsaved) await this.save(this.process);
    });
  }

  /**
   * Saves the state (unless saved since R last ran) and ends the process: the session holds no memory
   * and no uid until its next call. After what is queued and any file operation under way. Rejects
   * when the state could not be saved; the session then lives on as it was.
   */
  suspend(): Promise<void> {
    return this.own(async () => {
      // What ran before has ended: nothing is left to give up at a stop.
      clearTimeout(this.abandonTimer);
      if (this.users > 0) await new Promise<void>((resolve) => (this.usersGone = resolve));
      this.usersGone = undefined;
      const process = this.process;
      if (!process || this.ended) return;
      if (this.unsaved) await this.save(process);
      await this.letGo(process);
    });
  }

  /**
   * The service stops: what is queued fails with `reason`, a running evaluation is interrupted, then
   * the state is saved and the process ended. When that save fails, the last saved state is kept if
   * there is one (what changed since is lost, and said by the rejection); otherwise the session ends.
   */
  async shutDown(reason: Error): Promise<void> {
    this.stopping = reason;
    for (const job of this.queue.splice(0)) job.drop(reason);
    if (this.process?.child.interrupt()) {
      // R code can ignore SIGINT: past the grace time its evaluation is given up, never the save after it.
      this.abandonTimer = setTimeout(() => void this.abandon(), Math.max(0, this.options.interruptGraceSeconds) * 1000);
    }
    try {
      await this.suspend();
    } catch (error) {
      await this.abandon();
      throw error;
    } finally {
      clearTimeout(this.abandonTimer);
    }
  }

  /** At a stop, a process that cannot be saved ends: the session keeps its last saved state, if any, else ends. */
  private async abandon(): Promise<void> {
    const process = this.process;
    if (!process) return;
    if (!this.saved) return this.end();
    process.child.kill();
    await this.letGo(process);
  }

  /** Kills the R process and everything it started, and removes the session's folders and state. */
  async end(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    const process = this.process;
    this.process = undefined;
    process?.child.kill();
    const reason = this.endedFault();
    for (const job of this.queue.splice(0)) job.drop(reason);
    for (const listener of this.endListeners.splice(0)) listener();
    await this.host.dispose(process);
  }

  private adopt(process: SessionProcess): void {
    this.process = process;
    // Its process ending on its own (killed, its memory, R crashed) ends the session; not one the
    // service ended itself after saving the state.
    process.child.onClose(() => {
      if (this.process !== process) return;
      this.lost = true;
      void this.end();
    });
  }

  private async save(process: SessionProcess): Promise<void> {
    this.changed = false;
    const outcome = await process.child.run(saveFrame(this.folders.state));
    if (!outcome.ok) {
      this.changed = true;
      throw sessionNotSaved(this.id, outcome.ended ? this.endedFault().message : outcome.error);
    }
    const { lost } = JSON.parse(outcome.value.toString("utf8")) as { lost?: unknown };
    this.saved = new Date();
    await this.host.saved(this, Array.isArray(lost) ? lost.map(String) : []);
  }

  private async letGo(process: SessionProcess): Promise<void> {
    this.process = undefined;
    await this.host.release(process);
  }

  /** The service's own work on the state, queued behind what runs; suspended or not. */
  private own(work: () => Promise<void>): Promise<void> {
    return new Promise((resolve, reject) => {
      this.enqueue({
        own: true,
        async run() {
          await work().then(resolve, reject);
        },
        drop: reject,
      });
    });
  }

  /**
   * The service's own interrupt (the caller left, a time limit passed): R code can ignore SIGINT
   * (`tryCatch(…, interrupt = …)` in a loop), so a session whose evaluation does not end within the
   * grace time is ended. `running` is the outcome of the evaluation being stopped.
   */
  private stop(running: Promise<Outcome>): void {
    if (!this.process?.child.interrupt()) return;
    const grace = setTimeout(() => void this.end(), Math.max(0, this.options.interruptGraceSeconds) * 1000);
    void running.finally(() => clearTimeout(grace));
  }

  private submit(entry: CommandEntry, request: Request, withResult: boolean): void {
    this.touch();
    const session = this;
    this.enqueue({
      async run() {
        if (entry.deleted) return release(request);
        entry.started();
        const outcome = await session.execute(request);
        if (outcome.ok) entry.completed(withResult ? outcome.value : undefined);
        else if (session.stopping) entry.failed(`${session.stopping.message} (${outcome.ended ? "its process ended" : outcome.error})`);
        else entry.failed(outcome.ended ? session.endedFault().message : outcome.error);
      },
      drop(reason) {
        release(request);
        entry.failed(reason.message);
      },
    });
  }

  /** Runs `request` when its turn comes; an abort before then removes it, during it interrupts R. */
  private schedule(request: Request, receivers: Receivers = {}, signal?: AbortSignal): Promise<Outcome> {
    this.touch();
    const session = this;
    return new Promise((resolve, reject) => {
      // Object methods, not named arrows (under tsx each named closure is also given its name, per
      // eval), and one abort listener for the job's whole life: queued, an abort takes it out of the
      // queue; running, it interrupts R.
      let running: Promise<Outcome> | undefined;
      const job: Job & { abort(): void } = {
        async run() {
          if (signal?.aborted) {
            release(request);
            return reject(signal.reason);
          }
          running = session.execute(request, receivers);
          try {
            resolve(await running);
          } finally {
            signal?.removeEventListener("abort", job.abort);
          }
        },
        drop(reason) {
          signal?.removeEventListener("abort", job.abort);
          release(request);
          reject(reason);
        },
        abort() {
          if (running) return session.stop(running);
          const index = session.queue.indexOf(job);
          if (index >= 0) {
            session.queue.splice(index, 1);
            release(request);
            reject(signal?.reason);
          }
        },
      };
      signal?.addEventListener("abort", job.abort, { once: true });
      this.enqueue(job);
    });
  }

  private async execute(request: Request, receivers: Receivers = {}): Promise<Outcome> {
    const child = this.process?.child;
    try {
      if (!child) return { ok: false, error: this.endedFault().message, ended: true };
      const frame = Buffer.isBuffer(request) ? request : await request.open(this.dirs).catch((error: unknown) => error);
      if (!Buffer.isBuffer(frame))
        return {
          ok: false,
          error: `The value could not be passed to the session: ${frame instanceof Error ? frame.message : String(frame)}`,
        };
      const outcome = await this.run(child, frame, receivers);
      const sharing = this.options.installs?.after(this.process?.owner);
      return sharing ? await sharing.then(() => outcome, notShared) : outcome;
    } finally {
      if (!Buffer.isBuffer(request)) await request.close();
    }
  }

  private async run(child: RChild, frame: Buffer, { events, value }: Receivers): Promise<Outcome> {
    const { maxEvalSeconds, maxEvalCpuSeconds } = this.options;
    this.changed = true;
    const running = child.run(frame, events, value);
    const timer = maxEvalSeconds > 0 ? setTimeout(() => this.stop(running), maxEvalSeconds * 1000) : undefined;
    const cpuWatch = maxEvalCpuSeconds > 0 ? this.watchCpu(child.pid, running, maxEvalCpuSeconds) : undefined;
    try {
      return await running;
    } finally {
      clearTimeout(timer);
      clearInterval(cpuWatch);
      this.touch();
    }
  }

  /** Stops `running` once the session process used `limit` more seconds of CPU than when it began. */
  private watchCpu(pid: number, running: Promise<Outcome>, limit: number): NodeJS.Timeout {
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
    (job.own || this.process ? job.run() : this.resumeFor(job)).finally(() => {
      this.active = false;
      this.pump();
    });
  }

  /** A suspended session's next job: a new process with the saved state first, or the job dropped with why not. */
  private async resumeFor(job: Job): Promise<void> {
    let process: SessionProcess;
    try {
      process = await this.host.resume();
    } catch (error) {
      return job.drop(error instanceof Error ? error : new Error(String(error)));
    }
    if (this.ended) {
      // Deleted while it resumed: the new process goes too.
      process.child.kill();
      await this.host.release(process);
      return job.drop(this.endedFault());
    }
    this.adopt(process);
    this.changed = false;
    await job.run();
  }

  /** A job that only needs the process: a suspended session is resumed for it. */
  private awaken(): Promise<void> {
    return new Promise((resolve, reject) => this.enqueue({ run: async () => resolve(), drop: reject }));
  }
}
