import http from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { LocalDoor } from "../listener/listener.js";

export interface WarmUpOptions {
  /** How many evaluations to make (server.warmUpCalls). */
  readonly calls: number;
  /** Opens the service on a Unix socket at the path given (OnePortServer.openLocal). */
  readonly openDoor: (socketPath: string) => Promise<LocalDoor>;
  /** Who calls: credentials the process made for it (UserDirectory.grant), with the role `user`. */
  readonly credentials: { readonly name: string; readonly password: string };
  /** Past it the warm-up gives up: it makes the first calls faster, it must never hold the start. */
  readonly timeoutMs: number;
}

export interface WarmUpOutcome {
  readonly calls: number;
  readonly ms: number;
}

/**
 * The service's first calls, made by itself before /_check says it is ready. A new process's first
 * calls run its JavaScript in V8's interpreter: the first 20 evaluations of a fresh server took 3.1–3.5×
 * as long as warm ones, 1.6–1.7× after this (`BENCH_ONLY=first`). These calls take the paths clients take (HTTP/1.1, the
 * REST edge, the interceptors, a session's frames to R and back): a session is opened, evaluated in
 * (REST with JSON and with R serialization, Connect with JSON) and closed. Through a Unix socket in a
 * private temporary folder, so that neither TLS nor the port's address is in the way.
 */
export async function warmUp(o: WarmUpOptions): Promise<WarmUpOutcome> {
  const started = performance.now();
  const dir = await mkdtemp(path.join(os.tmpdir(), "rock-warm-up-"));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const deadline = AbortSignal.timeout(o.timeoutMs);
  const authorization = `Basic ${Buffer.from(`${o.credentials.name}:${o.credentials.password}`).toString("base64")}`;
  const socketPath = path.join(dir, "door");
  let door: LocalDoor | undefined;
  try {
    door = await o.openDoor(socketPath);
    const call = (method: string, url: string, headers: http.OutgoingHttpHeaders = {}, body?: string, signal = deadline): Promise<string> =>
      request({ socketPath, agent, signal, method, path: url, headers: { authorization, ...headers } }, body);
    const created = JSON.parse(await call("POST", "/r/sessions")) as { id?: unknown };
    if (typeof created.id !== "string") throw new Error("the new session's answer has no id");
    const session = `/r/session/${encodeURIComponent(created.id)}`;
    const ways = evaluations(session, created.id);
    try {
      for (let i = 0; i < o.calls; i++) {
        const way = ways[i % ways.length]!;
        if ((await call("POST", way.path, way.headers, way.body)).length === 0) throw new Error("an evaluation answered nothing");
      }
    } finally {
      // Past the deadline too: the session must not outlive a warm-up that gave up.
      await call("DELETE", session, {}, undefined, AbortSignal.timeout(CLOSE_TIMEOUT_MS));
    }
    return { calls: o.calls, ms: Math.round(performance.now() - started) };
  } finally {
    agent.destroy();
    await door?.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/** How long the warm-up's session may take to close, whatever the warm-up's own deadline. */
const CLOSE_TIMEOUT_MS = 5_000;

interface Evaluation {
  readonly path: string;
  readonly headers: http.OutgoingHttpHeaders;
  readonly body: string;
}

/** The ways clients evaluate, taken in turn: mostly REST's `_eval` answering JSON, as rockr does. */
function evaluations(session: string, id: string): readonly Evaluation[] {
  const rest = (accept: string): Evaluation => ({
    path: `${session}/_eval`,
    headers: { "content-type": "application/x-rscript", accept },
    body: "1+1",
  });
  const connect: Evaluation = {
    path: "/rock.r.v1.RService/Eval",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ id, script: { contentType: "text/plain", data: Buffer.from("1+1").toString("base64") } }),
  };
  return [rest("application/json"), rest("application/octet-stream"), rest("application/json"), connect];
}

/** One request; its answer's body as text, or an error naming the status when it is not 2xx. */
function request(options: http.RequestOptions, body: string | undefined): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(options, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("error", reject);
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("latin1");
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) resolve(text);
        else reject(new Error(`${options.method} ${options.path} answered ${status}: ${text.slice(0, 200)}`));
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}
