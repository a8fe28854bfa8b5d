import type { Http2ServerRequest } from "node:http2";
import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";

/** A request body as Node gives it (HTTP/1.1 or HTTP/2). */
export type BodySource = Readable & { readonly headers: Record<string, string | string[] | undefined> };

/**
 * The whole body of a request, up to `limit` bytes; past it, the promise fails with `tooLarge()` (told
 * the declared length when that is what exceeded, else the first bytes that came) and
 * the rest of the body is read and dropped (a socket closed with unread bytes is reset, and the
 * client may lose the answer; the listener bounds how long this may take). Listens to the stream's
 * events rather than iterating it: an async iterator over the request costs more than the rest of a
 * small call.
 */
export function readWholeBody(
  req: BodySource,
  limit: number,
  tooLarge: (seen: { declared?: number; head?: Buffer }) => Error,
  /** Refuse at once when Content-Length says too much (false: read up to the limit, to see the first bytes). */
  byLength = true,
): Promise<Buffer> {
  // Object methods, not named arrows: under tsx each named closure is also given its name
  // (Object.defineProperty, ~0.2 µs), and these are made for every request with a body.
  const on = {
    refuse(seen: { declared?: number; head?: Buffer }): Error {
      req.resume();
      return tooLarge(seen);
    },
    settle(): void {
      req.off("data", on.data);
      req.off("end", on.end);
      req.off("error", on.fail);
      req.off("close", on.fail);
    },
    data(chunk: Buffer): void {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      on.settle();
      reject(on.refuse({ head: chunks[0] ?? chunk }));
    },
    end(): void {
      on.settle();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    },
    // An error here is the client's connection ending early ("aborted"), not a fault of the server.
    fail(): void {
      on.settle();
      reject(new ConnectError("client went away before sending the whole body", Code.Canceled));
    },
  };
  const declared = Number(req.headers["content-length"] ?? NaN);
  if (byLength && declared > limit) return Promise.reject(on.refuse({ declared }));
  const chunks: Buffer[] = [];
  let size = 0;
  let resolve!: (body: Buffer) => void;
  let reject!: (error: Error) => void;
  const body = new Promise<Buffer>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  req.on("data", on.data);
  req.once("end", on.end);
  req.once("error", on.fail);
  req.once("close", on.fail);
  return body;
}

/**
 * After an answer sent before its request's body ended (a refusal), the rest of the body is read and
 * dropped, so that the client can finish sending and read the answer; the listener's body bounds
 * (request-watch) limit how long that may take. Resetting the stream instead (RST_STREAM NO_ERROR)
 * would wait, in Node, for trailers that then never leave.
 */
export function dropUnreadBody(req: BodySource): void {
  if (req.readableEnded) return;
  if (!req.destroyed) return void req.resume();
  // Connect-ES stops reading by destroying Node's HTTP/2 request object, which leaves its stream open
  // and paused: the compatibility layer's data listener pauses it again on every chunk it cannot
  // push into the destroyed request. Without that listener the stream flows, and the data is dropped.
  const stream = (req as Partial<Pick<Http2ServerRequest, "stream">>).stream;
  if (!stream || stream.destroyed || stream.state.remoteClose === 1) return;
  stream.removeAllListeners("data");
  stream.resume();
}
