import type { RConfig } from "../../config/config.js";
import type { Fault } from "../../errors/fault.js";
import type { SessionQuotas } from "../confine/quotas.js";
import type { RSession } from "../session/session.js";
import { tooManySessions } from "./faults.js";
import type { SessionHomes } from "./homes.js";
import { ENDING_WAIT_MS } from "./teardowns.js";

export interface SessionLimitsOptions {
  readonly config: RConfig;
  readonly quotas?: SessionQuotas;
  readonly homes: SessionHomes;
  /** The open sessions, suspended ones included, by id. */
  readonly sessions: ReadonlyMap<string, RSession>;
}

/**
 * The limits on how many sessions there are (r.maxSessions, r.maxSessionsPerUser, the memory budget
 * r.sessionsMemoryMb), which sessions open, being opened and still ending count against, and what
 * r.maxSessions leaves for spares.
 */
export class SessionLimits {
  /** Sessions being created, counted against the limits before they exist. */
  private readonly opening = new Map<string, number>();

  constructor(private readonly options: SessionLimitsOptions) {}

  /**
   * Opens a session of `subject` with `open` once there is room for it (throws the limit reached),
   * counted against the limits while it opens.
   */
  async admit<T>(subject: string, open: () => Promise<T>): Promise<T> {
    await this.roomFor(subject);
    this.opening.set(subject, (this.opening.get(subject) ?? 0) + 1);
    try {
      return await open();
    } finally {
      const n = (this.opening.get(subject) ?? 1) - 1;
      if (n > 0) this.opening.set(subject, n);
      else this.opening.delete(subject);
    }
  }

  /**
   * How many spares `r.spareSessions` asks for, less what r.maxSessions leaves: spares, sessions and
   * sessions being opened (each takes a spare or forks) never exceed it together.
   */
  spareTarget(): number {
    const { spareSessions, maxSessions } = this.options.config;
    const room =
      maxSessions > 0 ? maxSessions - this.options.sessions.size - sum(this.opening.values()) - this.options.homes.ending : Infinity;
    return Math.max(0, Math.min(spareSessions, room));
  }

  /**
   * Room for one more session of `subject` (throws the limit reached): a limit reached while sessions'
   * ends still go on (deleted ones: their processes' memory, their uids, their places under
   * r.maxSessions) waits for those ends, up to ENDING_WAIT_MS, as a caller once waited for its DELETE.
   */
  private async roomFor(subject: string): Promise<void> {
    const deadline = Date.now() + ENDING_WAIT_MS;
    for (;;) {
      const refused = this.limitReached(subject);
      if (!refused) return;
      const left = deadline - Date.now();
      if (this.options.homes.ending === 0 || left <= 0) throw refused;
      await this.options.homes.oneEnded(left);
    }
  }

  /**
   * Sessions open, being opened and still ending, in total and for `subject`, against the configured
   * limits: the limit reached, if any. (A uid still held by a session's end is waited for by the fork,
   * engine/homes.ts.)
   */
  private limitReached(subject: string): Fault | undefined {
    const { maxSessions, maxSessionsPerUser } = this.options.config;
    if (maxSessions > 0 && this.options.sessions.size + sum(this.opening.values()) + this.options.homes.ending >= maxSessions) {
      return tooManySessions(`Too many R sessions: the server's limit of ${maxSessions} open sessions is reached`);
    }
    const { quotas } = this.options;
    if (quotas && !quotas.fits()) {
      return tooManySessions(
        `Too many R sessions: the R sessions' memory budget of ${this.options.config.sessionsMemoryMb} MiB (r.sessionsMemoryMb) is in use`,
      );
    }
    if (maxSessionsPerUser > 0) {
      let own = this.opening.get(subject) ?? 0;
      for (const s of this.options.sessions.values()) if (s.subject === subject) own++;
      if (own >= maxSessionsPerUser) {
        return tooManySessions(
          `Too many R sessions: ${subject} has ${own} open sessions, the limit per user is ${maxSessionsPerUser}; close one first`,
        );
      }
    }
    return undefined;
  }
}

function sum(values: Iterable<number>): number {
  let total = 0;
  for (const v of values) total += v;
  return total;
}
