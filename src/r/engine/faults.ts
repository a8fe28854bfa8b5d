import { Fault, retryLater } from "../../errors/fault.js";

/** The faults of the engine that governs all sessions: which exist, their limits, R's start, resumes. */

export function noSuchSession(id: string): Fault {
  return new Fault("not_found", `No such R session: ${id}`);
}

/** R is starting (the service's start, a restart, PUT /rserver) past the caller's wait: 503, come back. */
export function stillStarting(): Fault {
  return retryLater("R server is starting");
}

/** A limit on sessions is reached (429). */
export function tooManySessions(message: string): Fault {
  return new Fault("limit", message);
}

/** The kernel ended the session for its memory (its limit, or all sessions' budget): said to every call on it. */
export function outOfMemory(reason: string): Fault {
  return new Fault("limit", reason);
}

/**
 * A suspended session could not be brought back: its call fails (500, naming it), the session stays
 * suspended with its saved state, and nothing else is touched.
 */
export function sessionNotResumed(id: string, why: string): Fault {
  return new Fault("internal", `R session ${id} could not be resumed: ${why}`);
}
