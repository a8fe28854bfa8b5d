/**
 * Opal's app registry as its wire facts say it behaves (cluster-reference §2), since Opal (a Java
 * application) cannot run here: `POST /ws/apps` checks X-App-Auth against its token (401 otherwise),
 * calls the node back — `GET {server}/rserver` with a manager's Basic credentials, then `PUT {server}/rserver`
 * — before answering, keeps one entry per (name, type, server), drops the app when the call-back fails and
 * answers 200 all the same; `DELETE /ws/apps` takes it off.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface App {
  readonly name: string;
  readonly type: string;
  readonly cluster: string;
  readonly tags: readonly string[];
  readonly server: string;
}

export interface Seen {
  readonly method: string;
  readonly token: string | undefined;
  readonly body: string;
  readonly status: number;
  readonly at: number;
}

export class FakeOpal {
  readonly apps = new Map<string, App>();
  readonly seen: Seen[] = [];
  /** What the call-backs answered: "GET 200", "PUT 200", or "GET error …". */
  readonly callbacks: string[] = [];
  private constructor(
    private readonly server: Server,
    readonly url: string,
    private readonly token: string,
    private readonly manager: { name: string; password: string },
  ) {}

  static async start(token: string, manager: { name: string; password: string }): Promise<FakeOpal> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const opal = new FakeOpal(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token, manager);
    server.on("request", (req, res) => {
      void opal.answer(req).then(({ status, body }) => res.writeHead(status, { "Content-Type": "text/plain" }).end(body));
    });
    return opal;
  }

  /** An Opal that restarted: it knows no app. */
  forget(): void {
    this.apps.clear();
  }

  posts(): Seen[] {
    return this.seen.filter((s) => s.method === "POST");
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private async answer(req: IncomingMessage): Promise<{ status: number; body: string }> {
    let body = "";
    for await (const chunk of req) body += String(chunk);
    const token = req.headers["x-app-auth"] as string | undefined;
    const done = (status: number, text = "") => {
      this.seen.push({ method: req.method ?? "", token, body, status, at: Date.now() });
      return { status, body: text };
    };
    if (req.url !== "/ws/apps") return done(404);
    if (token !== this.token) return done(401, "Invalid application token");
    const app = JSON.parse(body) as App;
    const key = `${app.name}|${app.type}|${app.server}`;
    if (req.method === "DELETE") {
      this.apps.delete(key);
      return done(200);
    }
    if (req.method !== "POST") return done(405);
    if (!this.apps.has(key)) {
      const cluster = await this.callBack(app.server);
      // A failed call-back: the app is dropped, the POST answered 200 all the same.
      if (cluster !== undefined) this.apps.set(key, { ...app, cluster });
    }
    return done(200);
  }

  /** The node's cluster as GET /rserver tells it, after PUT /rserver; undefined when either failed. */
  private async callBack(server: string): Promise<string | undefined> {
    const authorization = `Basic ${Buffer.from(`${this.manager.name}:${this.manager.password}`).toString("base64")}`;
    try {
      const got = await fetch(`${server}/rserver`, {
        headers: { authorization, accept: "application/json" },
        signal: AbortSignal.timeout(5000),
      });
      this.callbacks.push(`GET ${got.status}`);
      if (!got.ok) return undefined;
      const status = (await got.json()) as { cluster: string; running: boolean };
      const put = await fetch(`${server}/rserver`, { method: "PUT", headers: { authorization }, signal: AbortSignal.timeout(5000) });
      this.callbacks.push(`PUT ${put.status}`);
      return put.ok && status.running ? status.cluster : undefined;
    } catch (e) {
      this.callbacks.push(`GET error ${(e as Error).message}`);
      return undefined;
    }
  }
}

/** Polls `check` every 100 ms until it holds; fails after `ms`. */
export async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
