import { Code, ConnectError } from "@connectrpc/connect";
import { retryLater } from "../server/rest-hints.js";

export function noSuchSession(id: string): ConnectError {
  return new ConnectError(`No such R session: ${id}`, Code.NotFound);
}

export function noSuchCommand(id: string): ConnectError {
  return new ConnectError(`No such R command: ${id}`, Code.NotFound);
}

/**
 * R is stopped and nothing will start it (an administrator stopped it, or its start failed): the
 * contract lists this among its 500s.
 */
export function notRunning(): ConnectError {
  return new ConnectError("R server is not running", Code.Internal);
}

/** R is starting (the service's start, a restart, PUT /rserver) past the caller's wait: 503, come back. */
export function stillStarting(): ConnectError {
  return retryLater("R server is starting");
}

/** An error raised by the caller's R code: the client's fault, answered 400 with R's message. */
export function rError(message: string): ConnectError {
  return new ConnectError(message, Code.InvalidArgument);
}

/** A file path or upload refused by the rules of the session's folders (400). */
export function badPath(message: string): ConnectError {
  return new ConnectError(message, Code.InvalidArgument);
}

/** A limit on sessions is reached (429). */
export function tooManySessions(message: string): ConnectError {
  return new ConnectError(message, Code.ResourceExhausted);
}
