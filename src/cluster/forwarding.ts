/**
 * Several nodes behind one address (docs/operations.md "Several nodes"): a call for a session another node holds,
 * or for the catalogue another node serves, is passed on to that node, as the caller made it (its
 * credentials, its message), over gRPC, and its answer passed back. It wraps the handlers, so it runs
 * after every interceptor — a node passes on only callers it authenticated itself, the peer checks them
 * again — and works the same whichever protocol the call came in by: REST, gRPC, gRPC-Web, Connect.
 */
import {
  create,
  type DescMessage,
  type DescMethod,
  type DescMethodStreaming,
  type Message,
  type MessageInitShape,
} from "@bufbuild/protobuf";
import { ConnectError, type HandlerContext, type MethodImplSpec, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Fault } from "../errors/fault.js";
import type { Peer } from "./peers.js";

/** Set on a passed-on call: it is served where it arrives, never passed on again (two nodes disagreeing cannot loop). */
export const FORWARDED_HEADER = "rock-forwarded-by";

export interface Target {
  readonly peer: Peer;
  /** What the peer holds, for the error when it cannot be reached ("R session <id>", "The catalogue"). */
  readonly what: string;
}

/** Where a call goes: a peer, or undefined for this node. Reads only the request's first message. */
export type CallRoute = (method: DescMethod, message: unknown) => Target | undefined;

/**
 * For a unary call about every node's sessions (the list, closing them all): how the answers of this
 * node and of each peer that answered make one. Undefined: the call is not of that kind.
 */
export type FanOut = (method: DescMethod) => ((answers: Message[]) => MessageInitShape<DescMessage>) | undefined;

/** How long a call about every node's sessions waits for each peer's answer. */
const FAN_OUT_TIMEOUT_MS = 5_000;

/** Request headers a peer needs: the caller's credentials. The transport writes its own protocol headers. */
const PASSED_ON = ["authorization"];
/** The peer's answer headers that are its protocol's, not the call's (each protocol writes its own). */
const PROTOCOL_HEADER =
  /^(content-type|content-length|content-encoding|accept-encoding|date|te|trailer|transfer-encoding|vary|grpc-.*|connect-.*)$/i;

/** Makes each method pass its calls on when `route` names a peer, and serve them itself otherwise. */
export function forwardingMethods(
  self: string,
  peers: readonly Peer[],
  route: CallRoute,
  fanOut: FanOut,
): (spec: MethodImplSpec) => MethodImplSpec {
  const transports = new Map<string, Transport>();
  const transportOf = (peer: Peer): Transport => {
    let t = transports.get(peer.url);
    if (t === undefined) {
      t = createGrpcTransport({ baseUrl: peer.url });
      transports.set(peer.url, t);
    }
    return t;
  };
  const targetOf = (method: DescMethod, message: unknown, ctx: HandlerContext): Target | undefined =>
    ctx.requestHeader.has(FORWARDED_HEADER) ? undefined : route(method, message);
  const headersFor = (ctx: HandlerContext): Headers => {
    const h = new Headers({ [FORWARDED_HEADER]: self });
    for (const name of PASSED_ON) {
      const v = ctx.requestHeader.get(name);
      if (v !== null) h.set(name, v);
    }
    return h;
  };

  return (spec) => {
    switch (spec.kind) {
      case "unary": {
        const { method, impl } = spec;
        const merge = fanOut(method);
        return {
          kind: "unary",
          method,
          impl: async (req, ctx) => {
            if (merge && !ctx.requestHeader.has(FORWARDED_HEADER)) {
              // A peer that cannot be reached holds nothing anyone can use now: its answer is left out,
              // and one that does not answer in time is left out too (a list must not hang on a peer).
              const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(FAN_OUT_TIMEOUT_MS)]);
              const remote = peers.map((peer) =>
                transportOf(peer)
                  .unary(method, signal, undefined, headersFor(ctx), req)
                  .then(
                    (r) => r.message,
                    () => undefined,
                  ),
              );
              const local = create(method.output, await impl(req, ctx));
              const answers = (await Promise.all(remote)).filter((m) => m !== undefined);
              return merge([local, ...answers]);
            }
            const target = targetOf(method, req, ctx);
            if (target === undefined) return impl(req, ctx);
            const res = await reaching(target, () => transportOf(target.peer).unary(method, ctx.signal, undefined, headersFor(ctx), req));
            answerHeaders(res, ctx);
            return res.message;
          },
        };
      }
      case "server_streaming": {
        const { method, impl } = spec;
        return {
          kind: "server_streaming",
          method,
          impl: async function* (req, ctx) {
            const target = targetOf(method, req, ctx);
            if (target === undefined) return yield* impl(req, ctx);
            const res = await reaching(target, () =>
              transportOf(target.peer).stream(method, ctx.signal, undefined, headersFor(ctx), once(req)),
            );
            answerHeaders(res, ctx);
            yield* relayed(res.message, target);
          },
        };
      }
      case "client_streaming": {
        const { method, impl } = spec;
        return {
          kind: "client_streaming",
          method,
          impl: async (reqs, ctx) => {
            // The first message names the session (an upload's id comes with its first chunk).
            const input = reqs[Symbol.asyncIterator]();
            const first = await input.next();
            const all = replay(first, input);
            const target = first.done ? undefined : targetOf(method, first.value, ctx);
            if (target === undefined) return impl(all, ctx);
            const res = await reaching(target, () =>
              transportOf(target.peer).stream(method as DescMethodStreaming, ctx.signal, undefined, headersFor(ctx), all),
            );
            let last: Awaited<ReturnType<typeof impl>> | undefined;
            for await (const m of relayed(res.message, target)) last = m;
            answerHeaders(res, ctx);
            if (last === undefined) throw new ConnectError(`node ${target.peer.id} answered no message`);
            return last;
          },
        };
      }
      default:
        return spec;
    }
  };
}

/** The peer's answer headers and trailers that belong to the call (x-total-count, …), added to this call's. */
function answerHeaders(res: { header: Headers; trailer: Headers }, ctx: HandlerContext): void {
  res.header.forEach((value, name) => {
    if (!PROTOCOL_HEADER.test(name)) ctx.responseHeader.set(name, value);
  });
  res.trailer.forEach((value, name) => {
    if (!PROTOCOL_HEADER.test(name)) ctx.responseTrailer.set(name, value);
  });
}

async function* once<T>(message: T): AsyncIterable<T> {
  yield message;
}

/** The first message read to route the call, then the rest, as one stream again. */
async function* replay<T>(first: IteratorResult<T>, rest: AsyncIterator<T>): AsyncIterable<T> {
  if (first.done) return;
  yield first.value;
  for (let r = await rest.next(); !r.done; r = await rest.next()) yield r.value;
}

async function reaching<T>(target: Target, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    throw unreachable(e, target);
  }
}

async function* relayed<T>(messages: AsyncIterable<T>, target: Target): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (e) {
    throw unreachable(e, target);
  }
}

/**
 * The peer's own answers (an error it raised: not found, refused) pass through as they are. A peer that
 * cannot be reached is said as such — the session exists, on a node this one cannot reach — never as
 * "no such session".
 */
function unreachable(e: unknown, target: Target): unknown {
  const system = systemErrorCode(e);
  if (system === undefined) return e;
  return new Fault(
    "unavailable",
    `${target.what} is held by node ${target.peer.id} (${target.peer.url}), which cannot be reached now (${system}); if that node stopped, what it held is gone`,
  );
}

/** The system error (ECONNREFUSED, ETIMEDOUT, …) under a transport's error, if that is what it is. */
function systemErrorCode(e: unknown): string | undefined {
  for (let c: unknown = e, depth = 0; c instanceof Error && depth < 5; c = c.cause, depth++) {
    const code = (c as Error & { code?: unknown }).code;
    if (typeof code === "string" && /^(E[A-Z]+|ERR_HTTP2_[A-Z_]+)$/.test(code)) return code;
  }
  return undefined;
}
