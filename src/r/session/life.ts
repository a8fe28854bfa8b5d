import type { Owner } from "../confine/as-owner.js";
import type { Fault } from "../../errors/fault.js";
import { sessionEnded } from "../process/faults.js";
import { CommandList } from "./commands.js";
import { sessionNotSaved } from "./faults.js";
import type { SessionDirs, SessionFolders, SessionProcess } from "./home.js";
import { saveFrame } from "../wire/protocol.js";

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
  saved(session: SessionLife, lost: readonly string[]): Promise<void>;
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

export interface Job {
  /** The service's own work on the session's state: runs as it is, suspended or not. */
  readonly own?: true;
  run(): Promise<void>;
  /** Called instead of `run` when the session ends first, or its process could not be resumed. */
  drop(reason: Error): void;
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
 * A session's life, whatever it runs: its process (adopted, suspended with its state saved, resumed on
 * the next job, ended), its jobs one at a time in submission order, its file operations and its end.
 * RSession (session.ts) adds what callers run in it.
 */
export abstract class SessionLife implements SessionInfo {
  readonly createdAt: Date;
  lastAccess: Date;
  readonly commands: CommandList;
  protected process: SessionProcess | undefined;
  /** When its state was last saved whole; undefined: never. */
  private saved: Date | undefined;
  /** R ran something since the state was last saved (or restored). */
  protected changed = false;
  protected readonly queue: Job[] = [];
  private active = false;
  private ended = false;
  /** Its process ended on its own, not by the service. */
  private lost = false;
  private endReason: Fault | undefined;
  private readonly endListeners: Array<() => void> = [];
  /** Why the service stopped the session (shutDown): what it was running failed for that. */
  protected stopping: Error | undefined;
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
    protected readonly options: SessionOptions,
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

  /** Why the session ended, for every call that meets its end: its memory, when the kernel ended it for that. */
  protected endedFault(): Fault {
    this.endReason ??= this.options.endedBy?.();
    return this.endReason ?? sessionEnded();
  }

  protected enqueue(job: Job): void {
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
