import { Code, ConnectError, type ContextValues } from "@connectrpc/connect";
import { pathOf, type ServerRequest, type ServerResponse } from "../http.js";
import { createCallContext, type CallContext, type ContextStart } from "./call-context.js";
import { withCallContext } from "./invoke.js";
import { ResponseMeter, responseMeterKey, restCallKey, type Protocol, type RefusedCall } from "../../interceptors/response-meter.js";

export interface CallKernelOptions {
  /** The context values a call starts with, as connect-node's `contextValues` (the composition's one function). */
  readonly contextValues: (req: ServerRequest) => ContextValues;
  /** Ends every call in flight when the service stops. */
  readonly shutdownSignal: AbortSignal;
  /** Told of each request a protocol answered itself, which no interceptor saw (the call observer records it). */
  readonly refused?: (call: RefusedCall) => void;
}

export interface CallStart extends ContextStart {
  readonly protocol: Protocol;
  /**
   * Whether the call is reported refused when it ends unseen by the interceptors (REST: a body too
   * large or that does not decode is the edge's refusal, and has its line).
   */
  readonly reportsRefusal: boolean;
}

/** The abort reason of a call that ended normally: shared, since an abort without one builds a DOMException per call. */
const CALL_ENDED = new ConnectError("call ended", Code.Canceled);

/**
 * What every protocol does around a call, in one place: the call's context values (the composition's,
 * with the response meter the call observer reads), its handler context when the protocol makes one,
 * the meter finished when the response closes, the call's signal aborted when the client leaves
 * early and ended with the call, and a request the protocol answered itself reported as refused.
 */
export class CallKernel {
  /** The calls this server's transports opened that have not ended: the service's stop ends them. */
  private readonly running = new Set<Call>();

  constructor(private readonly opts: CallKernelOptions) {
    const shutdown = opts.shutdownSignal;
    shutdown.addEventListener("abort", () => {
      for (const call of this.running) call.context.abort(shutdown.reason);
    });
  }

  /** A call whose handler context this server makes (REST, the unary fast path). */
  open(req: ServerRequest, res: ServerResponse, start: CallStart): Call {
    const call = new Call(req, start, this.opts, this.running);
    res.once("close", () => call.closed());
    return call;
  }

  /** The context values of a call whose handler context Connect-ES makes: `meter` among them, finished when the response closes. */
  values(req: ServerRequest, res: ServerResponse, meter: ResponseMeter): ContextValues {
    res.once("close", () => meter.finish());
    return this.opts.contextValues(req).set(responseMeterKey, meter);
  }

  /** A request the protocol answered before any call began (no route, an unknown method): reported as refused. */
  refuse(req: ServerRequest, refusal: Omit<RefusedCall, "request" | "bytesIn">): void {
    this.opts.refused?.({ ...refusedRequest(req), ...refusal });
  }
}

/**
 * One call a protocol of this server's took: the response meter the call observer reads (the protocol
 * adds what it writes and finishes it), and the handler context the call runs with.
 */
export class Call extends ResponseMeter {
  readonly context: CallContext;
  /** The code of the protocol's own error answer, when it gave one. */
  refusal: Code | undefined;
  private readonly protocol: Protocol;
  private readonly report: ((call: RefusedCall) => void) | undefined;
  private readonly started: number;

  constructor(
    private readonly req: ServerRequest,
    start: CallStart,
    kernel: CallKernelOptions,
    private readonly running: Set<Call>,
  ) {
    super();
    this.protocol = start.protocol;
    this.report = start.reportsRefusal ? kernel.refused : undefined;
    this.started = this.report ? performance.now() : 0;
    const values = kernel.contextValues(req).set(responseMeterKey, this);
    if (start.protocol === "rest") values.set(restCallKey, true);
    this.context = createCallContext(start, req, values);
    withCallContext(values, this.context);
    if (kernel.shutdownSignal.aborted) this.context.abort(kernel.shutdownSignal.reason);
    else running.add(this);
  }

  /** The call is over (its answer is decided): its signal ends, and its deadline. */
  end(): void {
    this.running.delete(this);
    this.context.abort(CALL_ENDED);
  }

  override finish(): void {
    if (this.finished) return;
    super.finish();
    if (!this.report || this.observed) return;
    this.report({
      ...refusedRequest(this.req),
      method: this.context.method,
      protocol: this.protocol,
      code: this.refusal ?? Code.Unknown,
      httpStatus: this.status === 0 ? undefined : this.status,
      started: this.started,
      bytesOut: this.bytesOut,
    });
  }

  /** The response closed: written, or the client left before it was; the handler's signal then tells it so. */
  closed(): void {
    this.finish();
    // Closed before the call ended: the client left (an error is only made then: it takes a stack trace).
    if (this.running.delete(this)) this.context.abort(new ConnectError("client went away", Code.Canceled));
  }
}

/** What a refused call's record says of its request: method and path (never the query), declared body size. */
function refusedRequest(req: ServerRequest): Pick<RefusedCall, "request" | "bytesIn"> {
  const length = req.headers["content-length"];
  return { request: `${req.method ?? "GET"} ${pathOf(req.url)}`, bytesIn: length === undefined ? undefined : Number(length) };
}
