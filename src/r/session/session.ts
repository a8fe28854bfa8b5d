import { Channel } from "../../channel.js";
import type { EventSink, Outcome, RChild, ValueSink } from "../process/child.js";
import type { CommandEntry } from "./commands.js";
import { cpuSeconds } from "../confine/processes.js";
import { rError } from "./faults.js";
import { evalFrame, type AssignSource, type ValueFormat } from "../wire/protocol.js";
import { AnswerPipe } from "../wire/value-pipe.js";
import { SessionLife, type Job } from "./life.js";
import { assignRequest, assignScript, notShared, pipedRequest, release, type Request } from "./requests.js";

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

/**
 * A stateful R session: one forked R process whose operations (sync calls, commands, Execute) run one
 * at a time in submission order. What they are lives here: evaluations and assignments, at once or as
 * commands, interrupted when the caller leaves or a limit passes. Its process's life, its state saved
 * (a checkpoint), its process ended (suspended) and resumed for the next operation, is SessionLife's
 * (life.ts).
 */
export class RSession extends SessionLife {
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
    const request = format === "rds" ? pipedRequest(script, () => answer) : evalFrame(script, format);
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
}
