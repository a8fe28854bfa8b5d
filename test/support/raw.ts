import net from "node:net";

/**
 * A plain TCP connection to a server, for requests no HTTP client would send (trickled headers,
 * bodies that stop, bare HTTP/2 frames): what the server sent, and when it closed.
 */
export interface RawConnection {
  readonly socket: net.Socket;
  /** Everything received so far. */
  received(): Buffer;
  /** Milliseconds from the connection's opening to the server closing it. */
  readonly closed: Promise<number>;
}

export function openRaw(port: number): Promise<RawConnection> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    const opened = Date.now();
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    // A reset or a write to a closed socket is one of the ways a server closes a connection.
    socket.on("error", () => undefined);
    const closed = new Promise<number>((done) => socket.once("close", () => done(Date.now() - opened)));
    socket.once("connect", () => resolve({ socket, received: () => Buffer.concat(chunks), closed }));
    socket.once("error", reject);
  });
}

/** Writes `text` one byte every `everyMs` until the socket closes or the text is sent. */
export async function trickle(socket: net.Socket, text: string, everyMs: number): Promise<void> {
  for (const byte of Buffer.from(text)) {
    if (socket.destroyed) return;
    socket.write(Buffer.of(byte));
    await sleep(everyMs);
  }
}

/** Resolves with the time `p` took, or with `Infinity` when it takes longer than `ms`. */
export async function within(p: Promise<number>, ms: number): Promise<number> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<number>((resolve) => (timer = setTimeout(() => resolve(Infinity), ms)));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
export const H2 = { DATA: 0, HEADERS: 1, SETTINGS: 4, FLAG_ACK: 1, FLAG_END_HEADERS: 4 } as const;

/** An HTTP/2 frame (RFC 9113 §4.1). */
export function h2Frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head.writeUInt8(type, 3);
  head.writeUInt8(flags, 4);
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

/** A gRPC / gRPC-Web / Connect streaming envelope around one message. */
export function envelope(message: Buffer, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}
