import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type HandlerContext } from "@connectrpc/connect";
import type { ServerRequest } from "../http.js";

export type CallContext = HandlerContext & {
  /** Ends the call's signal (the client left, the call is over, the service stops) and its deadline. */
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
 * which costs more than the rest of a small call: here one controller, a timer for the deadline when
 * the client set one, and the service's stop reaching the calls through the call kernel, not through a
 * listener per call.
 */
export function createCallContext(start: ContextStart, req: ServerRequest, values: ContextValues): CallContext {
  const controller = new AbortController();
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
    requestHeader: nodeHeaders(req.headers),
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    protocolName: start.protocol,
    values,
    url: start.url,
    abort(reason) {
      clearTimeout(deadline);
      if (!controller.signal.aborted) controller.abort(reason);
    },
  };
}

/**
 * Node's request headers as Headers, without HTTP/2 pseudo-headers: appended one by one, which costs
 * Headers half of what it takes to convert a list of pairs (0.6 against 1.5 µs for six headers, a hot
 * loop; test/bench/README.md, issue 40).
 */
function nodeHeaders(h: Record<string, string | string[] | undefined>): Headers {
  const headers = new Headers();
  for (const k in h) {
    if (k.charCodeAt(0) === 58 /* ':' */) continue;
    const v = h[k];
    if (Array.isArray(v)) for (const x of v) headers.append(k, x);
    else if (v !== undefined) headers.append(k, v);
  }
  return headers;
}
