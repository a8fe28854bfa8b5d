/** One step of a teardown: done when it resolves; a rejection says why it failed, and it is tried again. */
export type TeardownStep = () => Promise<void>;

/**
 * How long what a session's end still holds (a uid, a place under r.maxSessions) is waited for before
 * a caller is refused for want of it: an end takes a few ms, its processes' reaping at most a second
 * before it is tried again.
 */
export const ENDING_WAIT_MS = 2_000;

/** The wait before a failed step is tried again: doubling from the first, up to the last. */
const RETRY_FIRST_MS = 1_000;
const RETRY_LAST_MS = 60_000;

/**
 * What is left of ended sessions (and spares): their processes' end, their folders' removal, their
 * groups' release. Each runs its steps in turn; a step that fails is said in the console log and
 * tried again later, doubling the wait from 1 s to a minute, and the steps after it wait for it: a
 * teardown is never dropped half done. Until its last step is done it is counted (`size`): the engine
 * holds it against r.maxSessions, and the uid it gives back last is not free before. Once stopped (the
 * service stops), failed steps are not tried again: the next start removes what an earlier run left.
 */
export class Teardowns {
  private readonly running = new Set<Promise<void>>();
  private readonly waiting = new Set<() => void>();
  /** The pauses before retries, each with what ends it early (the stop). */
  private readonly pauses = new Map<NodeJS.Timeout, () => void>();
  private stopped = false;

  /** `log`: a line for the console log; `ended`: a teardown finished (a uid or a place may be free). */
  constructor(
    private readonly log: (line: string) => void,
    private readonly ended: () => void,
  ) {}

  /** Teardowns not finished. */
  get size(): number {
    return this.running.size;
  }

  /**
   * Runs `steps` of `what` (`R session <id>`) in turn. Resolves after their first try, never rejects:
   * then done, or handed to the retries, which go on, counted, in the background.
   */
  run(what: string, steps: readonly TeardownStep[]): Promise<void> {
    let firstTry!: () => void;
    const tried = new Promise<void>((resolve) => (firstTry = resolve));
    const all = this.steps(what, steps, firstTry).finally(() => {
      this.running.delete(all);
      firstTry();
      for (const wake of [...this.waiting]) wake();
      this.ended();
    });
    this.running.add(all);
    return tried;
  }

  /** Resolves once a teardown finished, or after `ms`; at once when none runs. */
  oneEnded(ms: number): Promise<void> {
    if (this.running.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.waiting.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.waiting.add(wake);
    });
  }

  /** No more retries; resolves once the steps under way now are done. */
  async stop(): Promise<void> {
    this.stopped = true;
    // A step waiting to be tried again is given up: its teardown ends now.
    for (const [timer, giveUp] of this.pauses) {
      clearTimeout(timer);
      giveUp();
    }
    this.pauses.clear();
    await Promise.all(this.running);
  }

  private async steps(what: string, steps: readonly TeardownStep[], firstTry: () => void): Promise<void> {
    for (const step of steps) {
      for (let wait = RETRY_FIRST_MS; ; wait = Math.min(wait * 2, RETRY_LAST_MS)) {
        try {
          await step();
          break;
        } catch (error) {
          const why = error instanceof Error ? error.message : String(error);
          if (this.stopped) {
            this.log(`${what}: ${why}; left for the next start of the service\n`);
            return;
          }
          this.log(`${what}: ${why}; tried again in ${wait / 1000} s\n`);
          firstTry();
          if (!(await this.pause(wait))) {
            this.log(`${what}: left for the next start of the service\n`);
            return;
          }
        }
      }
    }
  }

  /** Waits `ms`; false when the retries stopped meanwhile. */
  private pause(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pauses.delete(timer);
        resolve(!this.stopped);
      }, ms);
      timer.unref();
      this.pauses.set(timer, () => resolve(false));
    });
  }
}
