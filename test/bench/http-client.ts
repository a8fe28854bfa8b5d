/** Minimal node:http client over a keep-alive agent (no fetch: it adds its own overhead). */
import http from "node:http";
import type { Readable } from "node:stream";
import { basic } from "../support/server.js";

export interface HttpAnswer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

export interface HttpOptions {
  readonly headers?: http.OutgoingHttpHeaders;
  readonly body?: string | Uint8Array | Readable;
}

export class HttpClient {
  readonly agent: http.Agent;
  private readonly auth: string;

  /** `sockets` = 1 for latency figures (every request on the same connection). */
  constructor(
    private readonly port: number,
    user: string,
    sockets = 1,
    private readonly host = "127.0.0.1",
  ) {
    this.agent = new http.Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets });
    this.auth = basic(user);
  }

  /** Starts a request; the response is handed over unread. */
  open(method: string, path: string, o: HttpOptions = {}): Promise<http.IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        { host: this.host, port: this.port, method, path, agent: this.agent, headers: { authorization: this.auth, ...o.headers } },
        resolve,
      );
      req.on("error", reject);
      const body = o.body;
      if (body === undefined) req.end();
      else if (typeof body === "string" || body instanceof Uint8Array) req.end(body);
      else {
        body.on("error", (e) => req.destroy(e));
        body.pipe(req);
      }
    });
  }

  async request(method: string, path: string, o: HttpOptions = {}): Promise<HttpAnswer> {
    const res = await this.open(method, path, o);
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    return { status: res.statusCode ?? 0, headers: res.headers, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) };
  }

  /** Like `request`, but throws unless the status is `expected` (or any 2xx when omitted). */
  async ok(method: string, path: string, o: HttpOptions = {}, expected?: number): Promise<HttpAnswer> {
    const a = await this.request(method, path, o);
    if (expected !== undefined ? a.status !== expected : a.status < 200 || a.status > 299) {
      throw new Error(`${method} ${path} answered ${a.status}: ${a.body.toString("utf8", 0, 300)}`);
    }
    return a;
  }

  close(): void {
    this.agent.destroy();
  }
}
