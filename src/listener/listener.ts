import net from "node:net";
import http from "node:http";
import http2 from "node:http2";
import type { RequestHandler } from "../transport/http.js";
import { watchHttp1, watchHttp2, type BodyLimits } from "./request-watch.js";
import { watchSession } from "./session-watch.js";
import type { TlsCredentials } from "./tls.js";

export interface OnePortServer {
  readonly port: number;
  /**
   * The same service on a Unix socket at `socketPath` too, cleartext whatever the port speaks, until
   * the door is closed: for the process's own calls (the warm-up), which then take the port's code
   * paths without a TLS client or an address to reach. `socketPath` must lie in a folder only this
   * process's user may enter.
   */
  openLocal(socketPath: string): Promise<LocalDoor>;
  close(): Promise<void>;
}

export interface LocalDoor {
  /** Stops taking connections and ends those it took; the socket file is removed. */
  close(): Promise<void>;
}

/** Every bound a connection lives under, in milliseconds; all must be > 0. */
export interface ConnectionLimits extends BodyLimits {
  /** Nothing in flight: a connection before its first byte, between HTTP/1.1 requests, an HTTP/2 session without a stream. */
  readonly idleMs: number;
  /**
   * From a request's first byte to the end of its headers (HTTP/1.1), of an HTTP/2 connection's SETTINGS
   * exchange, of a TLS handshake.
   */
  readonly headersMs: number;
}

export interface ListenOptions {
  readonly port: number;
  readonly host: string;
  readonly limits: ConnectionLimits;
  /** When given, the port speaks HTTPS only (HTTP/2 and HTTP/1.1 by ALPN); otherwise cleartext only. */
  readonly tls?: TlsCredentials;
}

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
/** The first byte of a TLS handshake record; no HTTP/1 method or HTTP/2 preface starts with it. */
const TLS_HANDSHAKE = 0x16;
/** Node looks for HTTP/1.1 requests past their header time this often (its default is 30 s). */
const CHECK_MS = { min: 50, max: 1_000 };
/**
 * Streams a client may open at once on one HTTP/2 session (Node's default is unlimited): each holds
 * memory until its own bounds end it.
 */
const H2_SETTINGS: http2.Settings = { maxConcurrentStreams: 256 };
/** Told to a cleartext client of the HTTPS port, as Go's servers do, so that it learns why it failed. */
const CLEARTEXT_REFUSAL = (() => {
  const body = "This port speaks HTTPS only: use https://\n";
  return `HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`;
})();

/** How a connection opens, told by its first bytes. */
type Opening = "h2" | "http1" | "tls";

/**
 * Where sniffed connections go. The HTTP/1.1 server (the secure server itself under TLS) has its idle
 * connections closed first on shutdown, then its header-time checker stopped.
 */
interface Front {
  accept(opening: Opening, socket: net.Socket): void;
  readonly http1: { closeIdleConnections(): void; close(): void };
}

/**
 * One port for every protocol. Cleartext: h2c (gRPC, gRPC-Web, Connect over HTTP/2) and HTTP/1.1 (REST,
 * Connect, gRPC-Web); Node's `allowHTTP1` needs TLS, so the first bytes of each connection decide which
 * server gets the socket. TLS: one secure server, ALPN choosing HTTP/2 or HTTP/1.1. Either way the same
 * bounds apply, and sockets come from one net.Server that bounds how long a connection may stay silent.
 */
export async function listenOnePort(listener: RequestHandler, opts: ListenOptions): Promise<OnePortServer> {
  const limits = opts.limits;
  for (const [name, ms] of Object.entries(limits)) {
    if (typeof ms === "number" && !(ms > 0)) throw new Error(`connection limit ${name} must be > 0`);
  }
  const sessions = new Set<http2.ServerHttp2Session>();
  const front = opts.tls ? secureFront(listener, limits, sessions, opts.tls) : cleartextFront(listener, limits, sessions);
  const sockets = new Set<net.Socket>();
  const server = net.createServer(connectionsTo(front, limits, sockets));
  await listen(server, { port: opts.port, host: opts.host });
  const address = server.address() as net.AddressInfo;

  return {
    port: address.port,
    async openLocal(socketPath) {
      const local = cleartextFront(listener, limits, sessions);
      const taken = new Set<net.Socket>();
      const door = net.createServer(connectionsTo(local, limits, taken));
      await listen(door, { path: socketPath });
      return {
        async close() {
          const closed = new Promise<void>((resolve) => door.close(() => resolve()));
          for (const s of taken) s.destroy();
          await closed;
          local.http1.close();
        },
      };
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sessions) s.close();
      front.http1.closeIdleConnections();
      // A TLS socket is destroyed with the TCP socket under it.
      const deadline = setTimeout(() => {
        for (const s of sessions) s.destroy();
        for (const s of sockets) s.destroy();
      }, 2000);
      await closed;
      clearTimeout(deadline);
      front.http1.close(); // stops the header-time checker
    },
  };
}

/** Hands each connection to `front` once its first bytes tell how it opens; `sockets` holds the open ones. */
function connectionsTo(front: Front, limits: ConnectionLimits, sockets: Set<net.Socket>): (socket: net.Socket) => void {
  return (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.setNoDelay(true);
    sniff(socket, limits, (opening) => front.accept(opening, socket));
  };
}

function listen(server: net.Server, where: net.ListenOptions): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(where, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

function cleartextFront(listener: RequestHandler, limits: ConnectionLimits, sessions: Set<http2.ServerHttp2Session>): Front {
  const h1 = http.createServer(listener);
  boundHttp1(h1, limits);
  const h2 = http2.createServer({ settings: H2_SETTINGS }, listener);
  boundHttp2(h2, limits, sessions);
  // A TLS client goes to the HTTP/1.1 parser, which answers 400 and closes.
  return { accept: (opening, socket) => (opening === "h2" ? h2 : h1).emit("connection", socket), http1: h1 };
}

function secureFront(
  listener: RequestHandler,
  limits: ConnectionLimits,
  sessions: Set<http2.ServerHttp2Session>,
  credentials: TlsCredentials,
): Front {
  const secure = http2.createSecureServer(
    {
      cert: credentials.cert,
      key: credentials.key,
      allowHTTP1: true,
      ALPNProtocols: ["h2", "http/1.1"],
      // Counted from the first byte (the sniffer bounded the silence before it), like headers.
      handshakeTimeout: limits.headersMs,
      settings: H2_SETTINGS,
    },
    listener,
  );
  boundHttp1(secure, limits);
  boundHttp2(secure, limits, sessions);
  return {
    accept: (opening, socket) => (opening === "tls" ? secure.emit("connection", socket) : refuseCleartext(socket, limits)),
    // With allowHTTP1 the secure server has http.Server's connection handling; its typings omit it.
    http1: secure as http2.Http2SecureServer & Pick<http.Server, "closeIdleConnections">,
  };
}

/**
 * HTTP/1.1 bounds, for http.Server and for the secure server's HTTP/1.1 side (which reads the same
 * properties but sets no keep-alive timeout of its own: idle connections would stay for ever).
 */
function boundHttp1(server: http.Server | http2.Http2SecureServer, limits: ConnectionLimits): void {
  const bounds: Required<
    Pick<http.ServerOptions, "keepAliveTimeout" | "headersTimeout" | "requestTimeout" | "connectionsCheckingInterval">
  > = {
    keepAliveTimeout: limits.idleMs,
    headersTimeout: limits.headersMs,
    // Node's requestTimeout would also cut long uploads: request-watch bounds bodies instead.
    requestTimeout: 0,
    connectionsCheckingInterval: Math.min(CHECK_MS.max, Math.max(CHECK_MS.min, limits.headersMs / 4)),
  };
  Object.assign(server, bounds);
  server.on("request", (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) => {
    // The secure server emits HTTP/2 requests here too: their streams are watched in boundHttp2.
    if (req instanceof http.IncomingMessage && res instanceof http.ServerResponse) watchHttp1(req, res, limits);
  });
  // Node starts the checker of header times when its server listens; this one never does (its
  // sockets come from the sniffer), so it is told.
  server.emit("listening");
}

function boundHttp2(
  server: http2.Http2Server | http2.Http2SecureServer,
  limits: ConnectionLimits,
  sessions: Set<http2.ServerHttp2Session>,
): void {
  server.on("stream", (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => watchHttp2(stream, headers, limits));
  server.on("session", (s: http2.ServerHttp2Session) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
    watchSession(s, { handshakeMs: limits.headersMs, idleMs: limits.idleMs });
  });
}

/**
 * Answers a cleartext request on the HTTPS port and closes. The rest of what the client sends is read
 * and dropped, so that the kernel does not reset the connection before the answer is read; a client
 * resetting meanwhile only ends it sooner.
 */
function refuseCleartext(socket: net.Socket, limits: ConnectionLimits): void {
  socket.on("error", ignore);
  socket.end(CLEARTEXT_REFUSAL);
  socket.resume();
  const timer = setTimeout(() => socket.destroy(), limits.headersMs).unref();
  socket.once("close", () => clearTimeout(timer));
}

/**
 * Reads until the first bytes tell how the connection opens, then puts them back. Uses 'readable' +
 * read() + unshift(): a 'data'/pause sniffer leaves the socket in flowing mode, which breaks HTTP/2.
 */
function sniff(socket: net.Socket, limits: ConnectionLimits, decide: (opening: Opening) => void): void {
  let seen: Buffer = Buffer.alloc(0);
  // Until its first bytes a connection is idle (a client may open it early); once some came without
  // telling the protocol yet, the client is sending a preface, bounded like headers.
  let timer = setTimeout(() => socket.destroy(), limits.idleMs).unref();
  const done = (opening: Opening) => {
    clearTimeout(timer);
    socket.off("readable", onReadable);
    socket.off("close", onClose);
    socket.off("error", ignore);
    socket.unshift(seen);
    decide(opening);
  };
  const onClose = () => clearTimeout(timer);
  let sending = false;
  const onReadable = () => {
    let chunk: Buffer | null;
    while ((chunk = socket.read() as Buffer | null) !== null) {
      seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
      if (seen[0] === TLS_HANDSHAKE) return done("tls");
      const n = Math.min(seen.length, PREFACE.length);
      if (!seen.subarray(0, n).equals(PREFACE.subarray(0, n))) return done("http1");
      if (seen.length >= PREFACE.length) return done("h2");
    }
    if (seen.length > 0 && !sending) {
      sending = true;
      clearTimeout(timer);
      timer = setTimeout(() => socket.destroy(), limits.headersMs).unref();
    }
  };
  socket.on("readable", onReadable);
  socket.once("close", onClose);
  // A client may reset before any server owns the socket: unheard, that error would end the process.
  // The socket is already destroyed when it comes.
  socket.on("error", ignore);
}

function ignore(): void {}
