import type { DrainedService } from "../interceptors/drain-gate.js";

/**
 * serving → draining (a stop was asked: no new work, running calls may finish) → stopped (the drain
 * is over: what still runs is cut when the server closes).
 */
export type Phase = "serving" | "draining" | "stopped";

/** How a drain ended. */
export type DrainOutcome = "idle" | "timeout" | "cut";

/** What health reports (health.ts): serving until a stop begins. */
export interface ServingState {
  readonly serving: boolean;
  /** `listener` runs once, when serving ends; the function returned unsubscribes it. */
  onStop(listener: () => void): () => void;
}

export interface LifecycleOptions {
  /** How long running work may take to finish once a drain begins; <= 0: none. */
  readonly drainMs: number;
  /** Work in progress that is no call in flight (queued R commands, whose results clients will fetch). */
  readonly busy: () => boolean;
}

/** Between polls of `busy` during a drain: work outside calls has no event to wait for. */
const POLL_MS = 50;

/** The service's phase, and the calls that hold a drain (counted by src/interceptors/drain-gate.ts). */
export class ServiceLifecycle implements ServingState, DrainedService {
  private current: Phase = "serving";
  private calls = 0;
  private readonly stopListeners = new Set<() => void>();
  private wakeDrain: (() => void) | undefined;

  constructor(private readonly options: LifecycleOptions) {}

  get phase(): Phase {
    return this.current;
  }

  get serving(): boolean {
    return this.current === "serving";
  }

  onStop(listener: () => void): () => void {
    if (!this.serving) {
      listener();
      return () => undefined;
    }
    this.stopListeners.add(listener);
    return () => this.stopListeners.delete(listener);
  }

  callStarted(): void {
    this.calls++;
  }

  callEnded(): void {
    if (--this.calls === 0) this.wakeDrain?.();
  }

  /**
   * Stops taking new work and waits until nothing runs, the drain time has passed, or cut() is
   * called; the phase is then `stopped`.
   */
  async drain(): Promise<DrainOutcome> {
    this.leave("draining");
    const deadline = Date.now() + Math.max(0, this.options.drainMs);
    try {
      while (this.current === "draining") {
        if (this.calls === 0 && !this.options.busy()) return "idle";
        const left = deadline - Date.now();
        if (left <= 0) return "timeout";
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => this.wakeDrain?.(), Math.min(left, POLL_MS));
          this.wakeDrain = () => {
            clearTimeout(timer);
            this.wakeDrain = undefined;
            resolve();
          };
        });
      }
      return "cut";
    } finally {
      this.current = "stopped";
    }
  }

  /** Ends a drain at once (a second signal), or stops without one (close). */
  cut(): void {
    this.leave("stopped");
    this.wakeDrain?.();
  }

  private leave(to: Phase): void {
    if (this.current === "stopped") return;
    const wasServing = this.serving;
    this.current = to;
    if (!wasServing) return;
    for (const listener of [...this.stopListeners]) listener();
    this.stopListeners.clear();
  }
}
