/**
 * A minimal HTTP/1.1 client over one keep-alive socket, the REST counterpart of the bench's minimal
 * QAP1 client: each request is one write, each answer is read by Content-Length. It measures the
 * server, not node:http's client machinery (the rows measured with node:http stay beside it).
 */
import type net from "node:net";
import { basic } from "../support/server.js";
import { connectLoopback, SocketReader } from "./socket-reader.js";

const HEAD_END = Buffer.from("\r\n\r\n");

export interface RawAnswer {
  readonly status: number;
  readonly body: Buffer;
}

export class RawHttpClient {
  private readonly reader: SocketReader;
  private readonly fixed: string;

  private constructor(
    private readonly socket: net.Socket,
    port: number,
    user: string,
  ) {
    this.reader = new SocketReader(socket, "HTTP");
    this.fixed = `Host: 127.0.0.1:${port}\r\nAuthorization: ${basic(user)}\r\n`;
  }

  static async connect(port: number, user: string): Promise<RawHttpClient> {
    return new RawHttpClient(await connectLoopback(port), port, user);
  }

  async request(method: string, path: string, headers: Record<string, string>, body: string): Promise<RawAnswer> {
    let head = `${method} ${path} HTTP/1.1\r\n${this.fixed}`;
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
    this.socket.write(`${head}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    const text = (await this.reader.readThrough(HEAD_END)).toString("latin1");
    const status = Number(text.slice(9, 12));
    const length = /\r\ncontent-length: *(\d+)/i.exec(text);
    if (!length) throw new Error(`answer without Content-Length: ${text.split("\r\n")[0]}`);
    const n = Number(length[1]);
    return { status, body: n > 0 ? await this.reader.read(n) : Buffer.alloc(0) };
  }

  close(): void {
    this.socket.destroy();
  }
}
