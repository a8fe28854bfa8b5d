import { Fault } from "../../errors/fault.js";

/** The faults of one session's calls: its R code's errors, its files' rules, its commands, its saves. */

export function noSuchCommand(id: string): Fault {
  return new Fault("not_found", `No such R command: ${id}`);
}

/** An error raised by the caller's R code: the client's fault, answered 400 with R's message. */
export function rError(message: string): Fault {
  return new Fault("invalid", message);
}

/** A file path or upload refused by the rules of the session's folders (400). */
export function badPath(message: string): Fault {
  return new Fault("invalid", message);
}

/** A session's process could not save its state (suspend, checkpoint): the session lives on as it was. */
export function sessionNotSaved(id: string, why: string): Fault {
  return new Fault("internal", `R session ${id} could not be saved: ${why}`);
}
