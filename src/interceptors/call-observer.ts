import type { DescMethod, Message } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor, type StreamRequest, type StreamResponse, type UnaryRequest } from "@connectrpc/connect";
import { callerKey } from "../auth/caller.js";
import { codeName, httpStatusOf } from "../errors/mapping.js";
import { responseMeterKey, restCallKey, type Protocol, type RefusedCall } from "./response-meter.js";
import { OneMessage } from "./one-message.js";
import { onStreamEnd } from "./stream-end.js";

type Writable<T> = { -readonly [K in keyof T]: T[K] };

/** One finished call, as the access log and the metrics see it: no header, no body, no credential. */
export interface CallRecord {
  readonly service: string;
  readonly method: string;
  readonly protocol: Protocol;
  /** REST: the HTTP method and path, without the query (where a share key may travel). */
  readonly request: string | undefined;
  /** `ok` or the gRPC code's name (`permission_denied`). */
  readonly code: string;
  /** The HTTP status a REST call answered (201 and 204 included); undefined for the RPC protocols. */
  readonly httpStatus: number | undefined;
  readonly durationMs: number;
  /** The authenticated caller's name, `anonymous` without one. */
  readonly user: string;
  /** The R session the request names, for RPCs that name one. */
  readonly sessionId: string | undefined;
  /** The request's declared Content-Length, when it has one. */
  readonly bytesIn: number | undefined;
  /** The response body bytes the transport wrote, when it counts them (see ResponseMeter). */
  readonly bytesOut: number | undefined;
}

/** The service and method of a request that reached no RPC (REST: no route, a method not allowed). */
export const UNROUTED = "unrouted";

/** The interceptor, and what transports report to it of calls it never saw. */
export type CallObserver = Interceptor & { readonly refused: (call: RefusedCall) => void };

const observers = new WeakSet<Interceptor>();

/** The call observer among a transport's interceptors, for the calls it refuses before running them. */
export function observerIn(interceptors: readonly Interceptor[]): CallObserver | undefined {
  return interceptors.find((i): i is CallObserver => observers.has(i));
}

export interface CallObserverOptions {
  /** Whether the request's `id` field is an R session id (RService's session calls). */
  readonly namesSession: (method: DescMethod) => boolean;
  readonly sinks: readonly ((record: CallRecord) => void)[];
}

/**
 * The outermost interceptor: it times every call on every protocol and reports how it ended, so that a
 * refusal by the drain gate or by auth is seen too. A stream is reported when it ends; a call whose
 * transport meters its response, once the transport finished writing it.
 */
export function callObserver(opts: CallObserverOptions): CallObserver {
  const sessionCalls = new Map<DescMethod, boolean>();
  const namesSession = (m: DescMethod): boolean => {
    let v = sessionCalls.get(m);
    if (v === undefined) sessionCalls.set(m, (v = opts.namesSession(m)));
    return v;
  };
  const emit = (record: CallRecord): void => {
    for (const sink of opts.sinks) sink(record);
  };
  const interceptor: Interceptor = (next) => async (req) => {
    const started = performance.now();
    const meter = req.contextValues.get(responseMeterKey);
    if (meter) meter.observed = true;
    let sessionId: string | undefined;
    const tracked = namesSession(req.method);
    if (tracked && !req.stream) sessionId = idOf(req.message);
    else if (tracked && req.message instanceof OneMessage) sessionId = idOf(req.message.message);
    const request =
      tracked && sessionId === undefined && req.stream ? { ...req, message: peek(req.message, (m) => (sessionId ??= idOf(m))) } : req;
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(request as typeof req);
    } catch (error) {
      report(req, started, sessionId, error, emit);
      throw error;
    }
    if (!res.stream) {
      report(req, started, sessionId, undefined, emit);
      return res;
    }
    const message = onStreamEnd(res.message, (how) => {
      report(req, started, sessionId, how === "gaveUp" ? new ConnectError("the client went away", Code.Canceled) : how?.error, emit);
      return undefined;
    });
    return { ...res, message } as StreamResponse;
  };
  const refused = (call: RefusedCall): void =>
    emit({
      service: call.method?.parent.typeName ?? UNROUTED,
      method: call.method?.name ?? UNROUTED,
      protocol: call.protocol,
      request: call.request,
      code: codeName(call.code),
      httpStatus: call.httpStatus,
      durationMs: elapsedMs(call.started),
      // Refused before authentication: who sent it is not known.
      user: "anonymous",
      sessionId: undefined,
      bytesIn: call.bytesIn,
      bytesOut: call.bytesOut,
    });
  observers.add(interceptor);
  return Object.assign(interceptor, { refused });
}

/**
 * Reports how a call ended: at once, or once its transport finished writing the answer when it meters
 * it. A module function, not a closure per call (under tsx each named closure is also given its name).
 */
function report(
  req: UnaryRequest | StreamRequest,
  started: number,
  sessionId: string | undefined,
  error: unknown,
  emit: (record: CallRecord) => void,
): void {
  const meter = req.contextValues.get(responseMeterKey);
  const rest = req.contextValues.get(restCallKey);
  const ce = error === undefined ? undefined : ConnectError.from(error);
  const length = req.header.get("content-length");
  const record: Writable<CallRecord> = {
    service: req.service.typeName,
    method: req.method.name,
    protocol: rest ? "rest" : protocolOf(req.header.get("content-type")),
    request: rest ? `${req.requestMethod} ${pathOf(req.url)}` : undefined,
    code: codeName(ce?.code),
    httpStatus: rest && ce ? httpStatusOf(ce) : undefined,
    durationMs: elapsedMs(started),
    user: req.contextValues.get(callerKey)?.name ?? "anonymous",
    sessionId,
    bytesIn: length === null ? undefined : Number(length),
    bytesOut: undefined,
  };
  if (!meter) return emit(record);
  meter.whenFinished(() => {
    record.bytesOut = meter.bytesOut;
    // A REST success takes the status the edge wrote: 201 and 204 are the route's, not the handler's.
    if (rest && !ce && meter.status !== 0) record.httpStatus = meter.status;
    emit(record);
  });
}

function elapsedMs(started: number): number {
  return Math.round((performance.now() - started) * 1000) / 1000;
}

/** gRPC and gRPC-Web by their content types; whatever else the Connect router took is Connect. */
function protocolOf(contentType: string | null): Protocol {
  if (contentType?.startsWith("application/grpc-web")) return "grpc-web";
  if (contentType?.startsWith("application/grpc")) return "grpc";
  return "connect";
}

function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  const q = url.indexOf("?", start);
  return url.slice(start, q < 0 ? undefined : q);
}

function idOf(message: Message): string | undefined {
  const id = (message as { id?: unknown }).id;
  return typeof id === "string" && id !== "" ? id : undefined;
}

/** `source`, with `see` shown each message as it passes. */
function peek(source: StreamRequest["message"], see: (m: Message) => void): StreamRequest["message"] {
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      return {
        async next() {
          const r = await it.next();
          if (!r.done) see(r.value);
          return r;
        },
        return: async () => (await it.return?.()) ?? { done: true, value: undefined },
      };
    },
  };
}
