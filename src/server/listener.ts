import net from "node:net";
import http from "node:http";
import http2 from "node:http2";
import { watchHttp1, watchHttp2, type BodyLimits } from "./request-watch.js";
import { watchSession } from "./session-watch.js";

export type RequestListener = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

export interface OnePortServer {
  readonly port: number;
  close(): Promise<void>;
}

/** Every bound a connection lives under, in milliseconds; all must be > 0. */
export interface ConnectionLimits extends BodyLimits {
  /** Nothing in flight: a connection before its first byte, between HTTP/1.1 requests, an HTTP/2 session without a stream. */
  readonly idleMs: number;
  /** From a request's first byte to the end of its headers (HTTP/1.1), of an HTTP/2 connection's SETTINGS exchange. */
  readonly headersMs: number;
}

export interface ListenOptions {
  readonly port: number;
  readonly host: string;
  readonly limits: ConnectionLimits;
}

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
/** Node looks for HTTP/1.1 requests past their header time this often (its default is 30 s). */
const CHECK_MS = { min: 50, max: 1_000 };
/**
 * Streams a client may open at once on one HTTP/2 session (Node's default is unlimited): each holds
 * memory until its own bounds end it.
 */
const MAX_CONCURRENT_STREAMS = 256;

/**
 * One cleartext port for h2c (gRPC, gRPC-Web, Connect over HTTP/2) and HTTP/1.1 (REST, Connect,
 * gRPC-Web): Node's `allowHTTP1` needs TLS, so the first bytes of each connection decide which
 * server gets the socket.
 */
export async function listenOnePort(listener: RequestListener, opts: ListenOptions): Promise<OnePortServer> {
  const limits = opts.limits;
  for (const [name, ms] of Object.entries(limits)) {
    if (typeof ms === "number" && !(ms > 0)) throw new Error(`connection limit ${name} must be > 0`);
  }
  // Node's requestTimeout would also cut long uploads: request-watch bounds bodies instead.
  const h1 = http.createServer(
    {
      keepAliveTimeout: limits.idleMs,
      headersTimeout: limits.headersMs,
      requestTimeout: 0,
      connectionsCheckingInterval: Math.min(CHECK_MS.max, Math.max(CHECK_MS.min, limits.headersMs / 4)),
    },
    listener,
  );
  h1.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => watchHttp1(req, res, limits));
  // Node starts the checker of header times when its server listens; this one never does (its
  // sockets come from the sniffer), so it is told.
  h1.emit("listening");
  const h2 = http2.createServer({ settings: { maxConcurrentStreams: MAX_CONCURRENT_STREAMS } }, listener);
  h2.on("stream", (stream, headers) => watchHttp2(stream, headers, limits));
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
    watchSession(s, { handshakeMs: limits.headersMs, idleMs: limits.idleMs });
  });
  const sockets = new Set<net.Socket>();

  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.setNoDelay(true);
    sniff(socket, limits, (isH2) => (isH2 ? h2 : h1).emit("connection", socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const address = server.address() as net.AddressInfo;

  return {
    port: address.port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sessions) s.close();
      h1.closeIdleConnections();
      const deadline = setTimeout(() => {
        for (const s of sessions) s.destroy();
        h1.closeAllConnections();
        for (const s of sockets) s.destroy();
      }, 2000);
      await closed;
      clearTimeout(deadline);
      h1.close(); // stops the header-time checker
    },
  };
}

/**
 * Reads until the first bytes tell HTTP/2 from HTTP/1, then puts them back. Uses 'readable' +
 * read() + unshift(): a 'data'/pause sniffer leaves the socket in flowing mode, which breaks HTTP/2.
 */
function sniff(socket: net.Socket, limits: ConnectionLimits, decide: (isH2: boolean) => void): void {
  let seen: Buffer = Buffer.alloc(0);
  // Until its first bytes a connection is idle (a client may open it early); once some came without
  // telling the protocol yet, the client is sending a preface, bounded like headers.
  let timer = setTimeout(() => socket.destroy(), limits.idleMs).unref();
  const done = (isH2: boolean) => {
    clearTimeout(timer);
    socket.off("readable", onReadable);
    socket.off("close", onClose);
    socket.unshift(seen);
    decide(isH2);
  };
  const onClose = () => clearTimeout(timer);
  let sending = false;
  const onReadable = () => {
    let chunk: Buffer | null;
    while ((chunk = socket.read() as Buffer | null) !== null) {
      seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, PREFACE.length);
      if (!seen.subarray(0, n).equals(PREFACE.subarray(0, n))) return done(false);
      if (seen.length >= PREFACE.length) return done(true);
    }
    if (seen.length > 0 && !sending) {
      sending = true;
      clearTimeout(timer);
      timer = setTimeout(() => socket.destroy(), limits.headersMs).unref();
    }
  };
  socket.on("readable", onReadable);
  socket.once("close", onClose);
}
