import type { DescMethod } from "@bufbuild/protobuf";
import { createContextKey, createContextValues, type HandlerContext } from "@connectrpc/connect";
import { clientAddressKey } from "../auth/caller.js";

export type CallContext = HandlerContext & {
  /** Ends the call's signal (the client left, or the call is over) and unhooks it from shutdown. */
  abort(reason: unknown): void;
};

export interface CallContextInit {
  readonly method: DescMethod;
  readonly requestMethod: string;
  readonly url: string;
  readonly requestHeader: HeadersInit;
  readonly shutdownSignal: AbortSignal;
  /** The socket's remote address (what failed logins are counted by). */
  readonly clientAddress: string | undefined;
}

/** Set on calls the REST edge makes: interceptors see no protocol name, and REST's headers may look like Connect's. */
export const restCallKey = createContextKey(false, { description: "call made by the REST edge" });

const noTimeout = (): undefined => undefined;

/**
 * The HandlerContext of a REST call. Connect's createHandlerContext also builds a deadline signal and
 * links three signals per call, which REST (no timeout header) does not need and which costs more
 * than the rest of a small call: here one controller follows the shutdown signal.
 */
export function createCallContext(init: CallContextInit): CallContext {
  const controller = new AbortController();
  const shutdown = init.shutdownSignal;
  const onShutdown = (): void => controller.abort(shutdown.reason);
  if (shutdown.aborted) onShutdown();
  else shutdown.addEventListener("abort", onShutdown, { once: true });
  return {
    method: init.method,
    service: init.method.parent,
    signal: controller.signal,
    timeoutMs: noTimeout,
    requestMethod: init.requestMethod,
    requestHeader: new Headers(init.requestHeader),
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    protocolName: "rest",
    values: createContextValues().set(clientAddressKey, init.clientAddress).set(restCallKey, true),
    url: init.url,
    abort(reason) {
      shutdown.removeEventListener("abort", onShutdown);
      if (!controller.signal.aborted) controller.abort(reason);
    },
  };
}
