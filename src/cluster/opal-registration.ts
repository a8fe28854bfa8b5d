/**
 * Self-registration with Opal, as Rock 2.x does it (docs/operations.md "Several nodes", the wire facts in
 * cluster-reference §1–2): `POST {opal}/ws/apps` with the node's description and `X-App-Auth`, retried
 * until Opal answers 2xx; then, unlike Rock, again at a slow interval, since Opal silently drops a node
 * whose call-back failed; `DELETE` with the same body when the service stops. Opal calls back
 * `GET`/`PUT /rserver` before it answers the POST, so registration never runs on a request's path and
 * never holds the start, a call or the stop beyond a bound.
 */

export interface OpalRegistrationOptions {
  /** Opal's base URL. */
  readonly opal: string;
  /** X-App-Auth; empty: not sent. */
  readonly token: string;
  /** What Opal learns: `name` is the node id, `server` its public URL. */
  readonly app: { readonly name: string; readonly cluster: string; readonly tags: readonly string[]; readonly server: string };
  readonly retryMs: number;
  readonly refreshMs: number;
  readonly onOutcome: (outcome: RegistrationOutcome) => void;
}

export type RegistrationOutcome =
  | { readonly kind: "registered"; readonly status: number; readonly ms: number; readonly first: boolean }
  | { readonly kind: "refused"; readonly status: number; readonly body: string; readonly ms: number }
  | { readonly kind: "unreachable"; readonly error: string; readonly ms: number }
  | { readonly kind: "unregistered"; readonly status: number }
  | { readonly kind: "unregister-failed"; readonly error: string };

/** Opal calls the node back inside the POST (GET, then PUT /rserver): an answer may take that long. */
const POST_TIMEOUT_MS = 30_000;
/** The stop waits this long at most for Opal to take the node off. */
const DELETE_TIMEOUT_MS = 3_000;
/** An answer's body quoted in the log, at most. */
const BODY_CHARS = 500;

export class OpalRegistration {
  private timer: NodeJS.Timeout | undefined;
  private readonly stopping = new AbortController();
  private registered = false;
  private running: Promise<void> | undefined;

  constructor(private readonly options: OpalRegistrationOptions) {}

  /** Starts the attempts in the background: call it once R's start is over (Opal asks whether R runs). */
  start(): void {
    this.running = this.attempt();
  }

  /**
   * Stops the attempts and, when the node registered, asks Opal to take it off (one attempt, bounded).
   * Call it after R stopped, as Rock does.
   */
  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.stopping.abort();
    await this.running;
    if (!this.registered) return;
    try {
      const res = await this.send("DELETE", AbortSignal.timeout(DELETE_TIMEOUT_MS));
      this.options.onOutcome({ kind: "unregistered", status: res.status });
    } catch (e) {
      this.options.onOutcome({ kind: "unregister-failed", error: reason(e) });
    }
  }

  private async attempt(): Promise<void> {
    if (this.stopping.signal.aborted) return;
    const started = Date.now();
    let next = this.options.retryMs;
    try {
      const res = await this.send("POST", AbortSignal.any([this.stopping.signal, AbortSignal.timeout(POST_TIMEOUT_MS)]));
      const ms = Date.now() - started;
      if (res.ok) {
        this.options.onOutcome({ kind: "registered", status: res.status, ms, first: !this.registered });
        this.registered = true;
        next = this.options.refreshMs;
      } else {
        this.options.onOutcome({ kind: "refused", status: res.status, body: await opening(res, BODY_CHARS), ms });
      }
    } catch (e) {
      if (this.stopping.signal.aborted) return;
      this.options.onOutcome({ kind: "unreachable", error: reason(e), ms: Date.now() - started });
    }
    if (this.stopping.signal.aborted) return;
    this.timer = setTimeout(() => {
      this.running = this.attempt();
    }, next);
    this.timer.unref();
  }

  private send(method: "POST" | "DELETE", signal: AbortSignal): Promise<Response> {
    const { app, token } = this.options;
    // Rock writes this JSON by hand, unescaped; a tag or cluster with a quote would break it there.
    const body = JSON.stringify({ name: app.name, type: "rock", cluster: app.cluster, tags: app.tags, server: app.server });
    return fetch(new URL("ws/apps", this.options.opal.endsWith("/") ? this.options.opal : `${this.options.opal}/`), {
      method,
      headers: { "Content-Type": "application/json", ...(token ? { "X-App-Auth": token } : {}) },
      body,
      signal,
    });
  }
}

function reason(e: unknown): string {
  const error = e as Error & { cause?: { code?: string; message?: string } };
  if (error.name === "TimeoutError") return "no answer in time";
  return error.cause?.code ?? error.cause?.message ?? error.message;
}

/** The first `chars` characters of an answer's body, the rest not read: a body of any size costs no more. */
async function opening(res: Response, chars: number): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return "";
  const decoder = new TextDecoder();
  let text = "";
  try {
    while (text.length < chars) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    // what arrived is what is said
  } finally {
    void reader.cancel().catch(() => undefined);
  }
  return text.slice(0, chars);
}
