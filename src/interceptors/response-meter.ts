import type { DescMethod } from "@bufbuild/protobuf";
import { createContextKey, type Code } from "@connectrpc/connect";

/** The protocol a call came in with, as the access log and the metrics name it. */
export type Protocol = "rest" | "grpc" | "grpc-web" | "connect";

/**
 * A transport's count of one call's response: the bytes written are only known once the answer the
 * handler returned is encoded and sent, after the interceptors are done. The call kernel
 * (call-kernel.ts) puts a meter in the call's context values (responseMeterKey) before the
 * interceptors run, finishes it when the response closes (the client left), and reports a call the
 * protocol answered itself as refused when `observed` is still false at the end (the interceptors
 * never saw it). The protocol
 * - adds the body bytes it writes to `bytesOut` (framing included);
 * - sets `status` to the HTTP status it answered with, when that is the call's outcome (REST: 201 and
 *   204 are the edge's, from the route, not the handler's);
 * - calls `finish()` once the whole body was handed to the response (before its end is written, or
 *   right after `end()`: the record is then out before the client can have the answer).
 * The observer then holds the call's record back until `finish()`. Without a meter, it reports at once,
 * without `bytesOut`.
 */
export class ResponseMeter {
  /** Response body bytes written so far: the transport adds to it as it writes. */
  bytesOut = 0;
  /** The HTTP status written; 0 until then, and for protocols whose outcome is a code. */
  status = 0;
  /** Set by the observer when the call reaches it. */
  observed = false;
  private done = false;
  private pending: (() => void) | undefined;

  get finished(): boolean {
    return this.done;
  }

  /** The transport: the response is written, or will never be (the client left). Idempotent; a call never finished is never reported. */
  finish(): void {
    if (this.done) return;
    this.done = true;
    const report = this.pending;
    this.pending = undefined;
    report?.();
  }

  /** The observer: `report` once the transport finished (at once if it has). */
  whenFinished(report: () => void): void {
    if (this.done) report();
    else this.pending = report;
  }
}

export const responseMeterKey = createContextKey<ResponseMeter | undefined>(undefined, {
  description: "what the transport wrote of the response",
});

/** Set on calls REST makes: interceptors see no protocol name, and REST's headers may look like Connect's. */
export const restCallKey = createContextKey(false, { description: "call made by REST" });

/** A call a transport answered before any interceptor ran (REST: no route, 405, 413, a body that does not decode). */
export interface RefusedCall {
  /** The RPC the request was routed to; undefined when it reached none. */
  readonly method: DescMethod | undefined;
  readonly protocol: Protocol;
  readonly request: string | undefined;
  readonly code: Code;
  readonly httpStatus: number | undefined;
  /** performance.now() when the request came in. */
  readonly started: number;
  readonly bytesIn: number | undefined;
  readonly bytesOut: number | undefined;
}
