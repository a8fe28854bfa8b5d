import { Fault, retryLater } from "../errors/fault.js";

export function noSuchSession(id: string): Fault {
  return new Fault("not_found", `No such R session: ${id}`);
}

export function noSuchCommand(id: string): Fault {
  return new Fault("not_found", `No such R command: ${id}`);
}

/**
 * R is stopped and nothing will start it (an administrator stopped it, or its start failed), or it
 * stopped under the call: the contract lists this among its 500s.
 */
export function notRunning(): Fault {
  return new Fault("internal", "R server is not running");
}

/** R is starting (the service's start, a restart, PUT /rserver) past the caller's wait: 503, come back. */
export function stillStarting(): Fault {
  return retryLater("R server is starting");
}

/**
 * A forked session ended before it connected back: its confinement failed (the R server's console log
 * says why). The contract's 500 for a session that could not be created, said at once.
 */
export function sessionNotStarted(): Fault {
  return new Fault("internal", "R session could not start: it ended before it served (the R server's log, GET /rserver/_log, says why)");
}

export const SESSION_ENDED = "R session has ended";

/**
 * The session ended before or while it ran the call (deleted, its R process gone, R stopped): the
 * contract's 500 "the session could not be accessed", whether the call was waiting its turn or running.
 */
export function sessionEnded(): Fault {
  return new Fault("internal", SESSION_ENDED);
}

/** An error raised by the caller's R code: the client's fault, answered 400 with R's message. */
export function rError(message: string): Fault {
  return new Fault("invalid", message);
}

/** A file path or upload refused by the rules of the session's folders (400). */
export function badPath(message: string): Fault {
  return new Fault("invalid", message);
}

/** A limit on sessions is reached (429). */
export function tooManySessions(message: string): Fault {
  return new Fault("limit", message);
}

/** The kernel ended the session for its memory (its limit, or all sessions' budget): said to every call on it. */
export function outOfMemory(reason: string): Fault {
  return new Fault("limit", reason);
}

/** A session's process could not save its state (suspend, checkpoint): the session lives on as it was. */
export function sessionNotSaved(id: string, why: string): Fault {
  return new Fault("internal", `R session ${id} could not be saved: ${why}`);
}

/**
 * A suspended session could not be brought back: its call fails (500, naming it), the session stays
 * suspended with its saved state, and nothing else is touched.
 */
export function sessionNotResumed(id: string, why: string): Fault {
  return new Fault("internal", `R session ${id} could not be resumed: ${why}`);
}
