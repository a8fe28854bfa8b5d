import type http2 from "node:http2";

export interface SessionLimits {
  /** From the connection's first bytes to the end of the SETTINGS exchange. */
  readonly handshakeMs: number;
  /** A session without an open stream is closed (GOAWAY) past it. */
  readonly idleMs: number;
}

/** Time for a GOAWAY to reach the client before the connection closes. */
const GOAWAY_GRACE_MS = 500;

/**
 * Bounds an HTTP/2 session's life outside its streams. Node's own session timeout counts any frame,
 * so a client sending pings or a header block a byte at a time would keep it for ever: here a
 * session must finish the SETTINGS exchange in time, and is closed once it has had no open stream
 * for the idle time. A header block that never ends opens no stream, so it is bounded as well.
 */
export function watchSession(session: http2.ServerHttp2Session, limits: SessionLimits): void {
  const handshake = setTimeout(() => session.destroy(), limits.handshakeMs).unref();
  // Both directions: the client's SETTINGS came, and it acknowledged ours.
  let settled = 0;
  const onSettings = () => {
    if (++settled === 2) clearTimeout(handshake);
  };
  session.once("remoteSettings", onSettings);
  session.once("localSettings", onSettings);

  let open = 0;
  let idle: NodeJS.Timeout | undefined;
  const arm = () => {
    idle = setTimeout(() => {
      session.close();
      // Node ends a closed session when its last stream ends, but not one that had none left while
      // the GOAWAY was still being written.
      idle = setTimeout(() => open === 0 && session.destroy(), GOAWAY_GRACE_MS).unref();
    }, limits.idleMs).unref();
  };
  session.on("stream", (stream: http2.ServerHttp2Stream) => {
    open++;
    clearTimeout(idle);
    stream.once("close", () => {
      if (--open === 0 && !session.closed) arm();
    });
  });
  session.once("close", () => {
    clearTimeout(handshake);
    clearTimeout(idle);
  });
  arm();
}
