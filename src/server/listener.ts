import net from "node:net";
import http from "node:http";
import http2 from "node:http2";

export type RequestListener = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

export interface OnePortServer {
  readonly port: number;
  close(): Promise<void>;
}

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
/** A client that opens a socket and sends nothing must not hold it forever. */
const SNIFF_TIMEOUT_MS = 10_000;

/**
 * One cleartext port for h2c (gRPC, gRPC-Web, Connect over HTTP/2) and HTTP/1.1 (REST, Connect,
 * gRPC-Web): Node's `allowHTTP1` needs TLS, so the first bytes of each connection decide which
 * server gets the socket.
 */
export async function listenOnePort(listener: RequestListener, port: number, host: string): Promise<OnePortServer> {
  const h1 = http.createServer({ keepAliveTimeout: 65_000 }, listener);
  const h2 = http2.createServer({}, listener);
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  const sockets = new Set<net.Socket>();

  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.setNoDelay(true);
    sniff(socket, (isH2) => (isH2 ? h2 : h1).emit("connection", socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
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
    },
  };
}

/**
 * Reads until the first bytes tell HTTP/2 from HTTP/1, then puts them back. Uses 'readable' +
 * read() + unshift(): a 'data'/pause sniffer leaves the socket in flowing mode, which breaks HTTP/2.
 */
function sniff(socket: net.Socket, decide: (isH2: boolean) => void): void {
  let seen: Buffer = Buffer.alloc(0);
  const timer = setTimeout(() => socket.destroy(), SNIFF_TIMEOUT_MS);
  const done = (isH2: boolean) => {
    clearTimeout(timer);
    socket.off("readable", onReadable);
    socket.off("close", onClose);
    socket.unshift(seen);
    decide(isH2);
  };
  const onClose = () => clearTimeout(timer);
  const onReadable = () => {
    let chunk: Buffer | null;
    while ((chunk = socket.read() as Buffer | null) !== null) {
      seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, PREFACE.length);
      if (!seen.subarray(0, n).equals(PREFACE.subarray(0, n))) return done(false);
      if (seen.length >= PREFACE.length) return done(true);
    }
  };
  socket.on("readable", onReadable);
  socket.once("close", onClose);
}
