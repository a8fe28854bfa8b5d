import type http from "node:http";
import http2 from "node:http2";
import { Code } from "@connectrpc/connect";
import { restError } from "../transport/protocols/rest/errors.js";
import { pathOf } from "../transport/http.js";

/** How long a request's body may take to arrive. */
export interface BodyLimits {
  /** The whole body of a request that is not a stream. */
  readonly requestMs: number;
  /** Longest pause while a body is still arriving (uploads and client streams included). */
  readonly bodyIdleMs: number;
  /** Uploads and client streams: their bodies may take long, only pauses count. */
  readonly streamsRequest: (method: string, path: string) => boolean;
}

/**
 * After an HTTP/1.1 answer sent before its request's body ended (413, a refused upload), the rest is
 * read and dropped so that the client gets the answer rather than a reset; this bounds how long.
 */
const LINGER_MS = 2_000;

/**
 * Bounds the body of an HTTP/1.1 request. A trickling body (slow loris) is answered 408 and the
 * connection closed. Pauses are seen through the socket's own inactivity timer, which Node reports on
 * the request while it is incomplete and on the response once it is: the answer itself may then take
 * as long as it needs (a long evaluation, a log tail).
 */
export function watchHttp1(req: http.IncomingMessage, res: http.ServerResponse, limits: BodyLimits): void {
  if (!hasBody(req.headers)) return;
  const socket = req.socket;
  // Object methods, not named arrows: under tsx each named closure is also given its name, per request.
  const on = {
    expire(): void {
      if (req.complete) return;
      if (res.headersSent) return void socket.destroy();
      const e = restError(Code.DeadlineExceeded, "Request body not received in time", 408);
      res.writeHead(408, { ...e.headers, connection: "close", "content-length": String(Buffer.byteLength(e.body)) });
      res.end(e.body);
    },
    // Node aborts a request whose connection closes only while it is unanswered; one answered early
    // (408, 413, a refused upload) would wait for the rest of its body for ever.
    socketClosed(): void {
      if (!req.complete) req.destroy();
    },
  };
  let timer = limits.streamsRequest(req.method ?? "", pathOf(req.url)) ? undefined : unrefTimeout(on.expire, limits.requestMs);
  socket.setTimeout(limits.bodyIdleMs);
  req.once("timeout", on.expire);
  res.once("timeout", () => socket.setTimeout(0));
  res.once("finish", () => {
    clearTimeout(timer);
    if (!req.complete) timer = unrefTimeout(() => socket.destroy(), LINGER_MS);
  });
  socket.once("close", on.socketClosed);
  req.once("close", () => {
    clearTimeout(timer);
    socket.off("close", on.socketClosed);
  });
}

/**
 * Bounds the body of an HTTP/2 request: a stream whose body trickles or pauses is reset. The stream's
 * timer counts its own reads and writes; a stream whose request has ended is left alone however
 * quiet (server streams such as a log tail).
 */
export function watchHttp2(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, limits: BodyLimits): void {
  if (stream.endAfterHeaders) return;
  const ended = () => stream.state.remoteClose === 1;
  const expire = () => {
    if (!ended()) stream.close(http2.constants.NGHTTP2_CANCEL);
  };
  stream.setTimeout(limits.bodyIdleMs, () => (ended() ? stream.setTimeout(0) : expire()));
  if (limits.streamsRequest(headers[":method"] ?? "", pathOf(headers[":path"]))) return;
  const timer = unrefTimeout(expire, limits.requestMs);
  stream.once("close", () => clearTimeout(timer));
}

/** Per RFC 9112 a request has a body only if it says so. */
function hasBody(h: http.IncomingHttpHeaders): boolean {
  return h["transfer-encoding"] !== undefined || (h["content-length"] !== undefined && h["content-length"] !== "0");
}

function unrefTimeout(fn: () => void, ms: number): NodeJS.Timeout {
  return setTimeout(fn, ms).unref();
}
