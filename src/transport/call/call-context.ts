import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type HandlerContext } from "@connectrpc/connect";
import type { ServerRequest } from "../http.js";

export type CallContext = HandlerContext & {
  /** Ends the call's signal (the client left, or the call is over) and unhooks it from shutdown and the deadline. */
  abort(reason: unknown): void;
};

/** What the protocol that took a call knows of it. */
export interface ContextStart {
  readonly method: DescMethod;
  /** `rest`, or the RPC protocol (`grpc`, `grpc-web`, `connect`) as Connect-ES names it. */
  readonly protocol: string;
  /** The request's URL, scheme and authority included. */
  readonly url: string;
  /** The client's deadline (grpc-timeout, connect-timeout-ms); the signal aborts DEADLINE_EXCEEDED when it passes. */
  readonly timeoutMs?: number;
}

const noTimeout = (): undefined => undefined;
/** The longest delay a Node timer takes (2^31 − 1 ms, about 24.8 days). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The HandlerContext of a call taken by this server's own transports (the REST edge, the unary fast
 * path). Connect's createHandlerContext links three signals per call (deadline, request, shutdown),
 * which costs more than the rest of a small call: here one controller follows the shutdown signal and,
 * when the client set one, a timer for the deadline.
 */
export function createCallContext(start: ContextStart, req: ServerRequest, values: ContextValues, shutdown: AbortSignal): CallContext {
  const controller = new AbortController();
  const onShutdown = new ShutdownLink(controller, shutdown);
  if (shutdown.aborted) onShutdown.handleEvent();
  else shutdown.addEventListener("abort", onShutdown, { once: true });
  let timeoutMs: () => number | undefined = noTimeout;
  let deadline: NodeJS.Timeout | undefined;
  if (start.timeoutMs !== undefined) {
    const at = Date.now() + start.timeoutMs;
    timeoutMs = () => at - Date.now();
    // Node fires a timer longer than its maximum at once: such a deadline (weeks) is simply not armed.
    if (start.timeoutMs <= MAX_TIMER_MS)
      deadline = setTimeout(() => controller.abort(new ConnectError("the deadline passed", Code.DeadlineExceeded)), start.timeoutMs);
  }
  return {
    method: start.method,
    service: start.method.parent,
    signal: controller.signal,
    timeoutMs,
    requestMethod: req.method ?? "GET",
    requestHeader: new Headers(nodeHeaders(req.headers)),
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    protocolName: start.protocol,
    values,
    url: start.url,
    abort(reason) {
      shutdown.removeEventListener("abort", onShutdown);
      clearTimeout(deadline);
      if (!controller.signal.aborted) controller.abort(reason);
    },
  };
}

/** Aborts a call when the service stops: a listener object, where a closure per call would also be named under tsx. */
class ShutdownLink {
  constructor(
    private readonly controller: AbortController,
    private readonly shutdown: AbortSignal,
  ) {}

  handleEvent(): void {
    this.controller.abort(this.shutdown.reason);
  }
}

/** Node's request headers as Headers takes them, without HTTP/2 pseudo-headers. */
function nodeHeaders(h: Record<string, string | string[] | undefined>): [string, string][] {
  const out: [string, string][] = [];
  for (const k in h) {
    if (k.charCodeAt(0) === 58 /* ':' */) continue;
    const v = h[k];
    if (Array.isArray(v)) for (const x of v) out.push([k, x]);
    else if (v !== undefined) out.push([k, v]);
  }
  return out;
}
