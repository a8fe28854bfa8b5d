import type { RServerProcess } from "../process/rserver.js";
import type { EngineEvent } from "./events.js";
import type { Fork, SessionHomes } from "./homes.js";

export interface SparePoolOptions {
  readonly homes: SessionHomes;
  /** The R server spares are forked from, while it runs and the engine is not closed. */
  readonly server: () => RServerProcess | undefined;
  /** How many spares are wanted now (r.spareSessions, less what r.maxSessions leaves). */
  readonly target: () => number;
  readonly emit: (event: EngineEvent) => void;
}

/** A session process forked ahead of demand (r.spareSessions). */
export interface Spare {
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

/**
 * Forking a session costs tens of ms (the R server's fork, the child's confinement, two connections
 * whose owner Node checks), so up to r.spareSessions are kept forked ahead: creating a session hands
 * one over and a replacement is forked in the background. Spares count against r.maxSessions and
 * take uids, never more than are free: a caller takes a spare before it would fork, so a uid held by
 * a spare is one held for the next caller.
 */
export class SparePool {
  private readonly spares: Spare[] = [];
  /** Forks whose death, while they wait in the pool, takes them out of it and ends them. */
  private readonly watched = new WeakSet<Fork>();
  /** Spares Check took to probe with and will put back: the pool is not refilled for them meanwhile. */
  private lent = 0;

  constructor(private readonly options: SparePoolOptions) {}

  /**
   * Forks spares of the running server up to the target, SPARE_FORKS_AT_ONCE at a time, and only with
   * uids that are free (a spare never makes a caller wait for a uid: the caller would take that spare).
   */
  fill(): void {
    const { homes } = this.options;
    const server = this.options.server();
    if (!server?.running) return;
    const target = this.options.target();
    let forking = this.spares.filter((s) => !s.fork).length;
    while (this.spares.length + this.lent < target && forking < SPARE_FORKS_AT_ONCE && homes.available > 0) {
      forking++;
      const ready = homes.fork(server).then(
        (fork): Fork | undefined => fork,
        () => undefined,
      );
      const spare = this.add(ready);
      void ready.then((fork) => {
        // A spare that failed leaves the pool; the next demand forks again (no retry loop here).
        if (fork) this.fill();
        else this.remove(spare);
      });
    }
  }

  /**
   * Takes a spare out of the pool, a ready one first, else the one forking longest: it is then the
   * caller's alone. Undefined when there is none. (The pool only ever holds spares of the running
   * server: stopping it or its exit empties the pool.)
   */
  take(): Promise<Fork | undefined> | undefined {
    const spare = this.spares.find((s) => s.fork) ?? this.spares[0];
    if (!spare) return undefined;
    this.remove(spare);
    return spare.ready;
  }

  /**
   * A session process of `server` for a caller: a spare, ready or still forking, else one the caller
   * forks (and is told why, when that fails).
   */
  async forkFor(server: RServerProcess): Promise<Fork> {
    const { homes } = this.options;
    let fork: Fork | undefined;
    while (!fork) {
      const taken = this.take();
      if (!taken) break;
      // The replacement forks while this one is handed over.
      this.fill();
      const spare = await taken;
      // A spare whose fork failed: the caller forks itself and is told why. Taking the next spare
      // instead, whose replacement forks and fails in turn, would fork for ever when no fork can succeed.
      if (!spare) break;
      if (spare.child.closed) await homes.release(spare);
      else fork = spare;
    }
    if (!fork) {
      // No spare, or one that failed: this caller's fork takes its uid before any replacement does, so
      // when few uids are left the caller gets one rather than a spare.
      const own = homes.fork(server);
      this.fill();
      fork = await own;
    }
    return fork;
  }

  /** Takes a spare for Check's probe: the pool counts it as its own until `returned` says it is back. */
  lend(): Promise<Fork | undefined> | undefined {
    const taken = this.take();
    if (taken) this.lent++;
    return taken;
  }

  /** The spare `lend` gave is back with the probe (put back or ended by `keep`). */
  returned(): void {
    this.lent--;
  }

  /**
   * A fork that served Check's probe (`1` leaves nothing in it) becomes a spare again while `server`
   * still runs and the pool has room; otherwise it is ended.
   */
  async keep(fork: Fork, server: RServerProcess): Promise<void> {
    if (this.options.server() === server && this.spares.length < this.options.target()) this.add(Promise.resolve(fork));
    else await this.options.homes.release(fork);
  }

  /** Empties the pool (the server stops or is gone); `release` ends what it answers. */
  takeAll(): Spare[] {
    return this.spares.splice(0);
  }

  /** Ends spares taken out of the pool, those still forking once they are forked. */
  async release(spares: readonly Spare[]): Promise<void> {
    await Promise.all(spares.map(async (spare) => this.options.homes.release(await spare.ready)));
  }

  /**
   * Puts a spare in the pool. One whose process dies there (killed from outside) is ended at once; it
   * is not replaced until the next demand, so spares that keep dying cannot keep R forking.
   */
  private add(ready: Promise<Fork | undefined>): Spare {
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
          this.remove(pooled);
          void this.options.homes.release(fork);
          this.options.emit({ kind: "spare-died" });
        }
      });
    });
    return spare;
  }

  private remove(spare: Spare): void {
    const i = this.spares.indexOf(spare);
    if (i >= 0) this.spares.splice(i, 1);
  }
}
