import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type HandlerContext } from "@connectrpc/connect";

export type CallContext = HandlerContext & {
  /** Ends the call's signal (the client left, or the call is over) and unhooks it from shutdown and the deadline. */
  abort(reason: unknown): void;
};

export interface CallContextInit {
  readonly method: DescMethod;
  /** `rest`, or the RPC protocol (`grpc`, `grpc-web`, `connect`) as Connect-ES names it. */
  readonly protocolName: string;
  readonly requestMethod: string;
  readonly url: string;
  readonly requestHeader: HeadersInit;
  readonly shutdownSignal: AbortSignal;
  /** The call's context values, made by the composition's `contextValues(req)`: the interceptors' keys are theirs, not the transport's. */
  readonly values: ContextValues;
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
export function createCallContext(init: CallContextInit): CallContext {
  const controller = new AbortController();
  const shutdown = init.shutdownSignal;
  const onShutdown = (): void => controller.abort(shutdown.reason);
  if (shutdown.aborted) onShutdown();
  else shutdown.addEventListener("abort", onShutdown, { once: true });
  let timeoutMs: () => number | undefined = noTimeout;
  let deadline: NodeJS.Timeout | undefined;
  if (init.timeoutMs !== undefined) {
    const at = Date.now() + init.timeoutMs;
    timeoutMs = () => at - Date.now();
    // Node fires a timer longer than its maximum at once: such a deadline (weeks) is simply not armed.
    if (init.timeoutMs <= MAX_TIMER_MS) deadline = setTimeout(() => controller.abort(new ConnectError("the deadline passed", Code.DeadlineExceeded)), init.timeoutMs);
  }
  return {
    method: init.method,
    service: init.method.parent,
    signal: controller.signal,
    timeoutMs,
    requestMethod: init.requestMethod,
    requestHeader: new Headers(init.requestHeader),
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    protocolName: init.protocolName,
    values: init.values,
    url: init.url,
    abort(reason) {
      shutdown.removeEventListener("abort", onShutdown);
      clearTimeout(deadline);
      if (!controller.signal.aborted) controller.abort(reason);
    },
  };
}

/** Node's request headers as Connect takes them (it builds its own Headers from this), without HTTP/2 pseudo-headers. */
export function nodeHeaders(h: Record<string, string | string[] | undefined>): [string, string][] {
  const out: [string, string][] = [];
  for (const k in h) {
    if (k.charCodeAt(0) === 58 /* ':' */) continue;
    const v = h[k];
    if (Array.isArray(v)) for (const x of v) out.push([k, x]);
    else if (v !== undefined) out.push([k, v]);
  }
  return out;
}
