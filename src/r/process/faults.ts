import { Fault } from "../../errors/fault.js";

/** The faults of the R processes: R not running, a session that could not start or has ended. */

/**
 * R is stopped and nothing will start it (an administrator stopped it, or its start failed), or it
 * stopped under the call: the contract lists this among its 500s.
 */
export function notRunning(): Fault {
  return new Fault("internal", "R server is not running");
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
