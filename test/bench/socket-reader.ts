import net from "node:net";

/** A connected loopback socket with Nagle off, as every minimal client of the bench uses. */
export async function connectLoopback(port: number): Promise<net.Socket> {
  const socket = net.connect({ host: "127.0.0.1", port });
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  socket.setNoDelay(true);
  return socket;
}

/**
 * Buffered reads of exact sizes (or up to a delimiter) from one socket, for the bench's minimal
 * clients: one request in flight at a time, so one waiter at a time.
 */
export class SocketReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private waiter: { want: number | Buffer; resolve: (b: Buffer) => void; reject: (e: Error) => void } | undefined;
  private failure: Error | undefined;

  constructor(socket: net.Socket, what: string) {
    socket.on("data", (chunk: Buffer) => {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
      this.pump();
    });
    const fail = (e: Error) => {
      this.failure = e;
      const w = this.waiter;
      this.waiter = undefined;
      w?.reject(e);
    };
    socket.on("error", fail);
    socket.on("close", () => fail(new Error(`${what} connection closed`)));
  }

  /** Exactly `n` bytes. */
  read(n: number): Promise<Buffer> {
    return this.wait(n);
  }

  /** Everything up to and including `delimiter`. */
  readThrough(delimiter: Buffer): Promise<Buffer> {
    return this.wait(delimiter);
  }

  private wait(want: number | Buffer): Promise<Buffer> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.waiter = { want, resolve, reject };
      this.pump();
    });
  }

  private pump(): void {
    const w = this.waiter;
    if (!w) return;
    if (typeof w.want === "number" && this.buffered < w.want) return;
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.buffered);
    this.chunks = [all];
    let end: number;
    if (typeof w.want === "number") end = w.want;
    else {
      const at = all.indexOf(w.want);
      if (at < 0) return;
      end = at + w.want.length;
    }
    const rest = all.subarray(end);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.buffered = rest.length;
    this.waiter = undefined;
    w.resolve(all.subarray(0, end));
  }
}
