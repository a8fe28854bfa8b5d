import { create, type DescMessage, type Message, type MessageInitShape } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextKey,
  type ContextValues,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
  type StreamRequest,
  type UnaryRequest,
} from "@connectrpc/connect";
import { OneMessage } from "../../interceptors/one-message.js";
import type { CallContext } from "./call-context.js";

/** What an interceptor wraps: a call from its request to its response. */
type Next = Parameters<Interceptor>[0];
type Request = Parameters<Next>[0];

/** A call this server's transports took, as the innermost step of a chain finds it. */
interface CallSlot {
  readonly context: CallContext;
  /** The request the transport handed to the chain: the handler's context is the call's own while it arrives unchanged. */
  request: Request | undefined;
}

/**
 * The handler context of a call this server's transports took, among its context values: the
 * innermost step of a chain composed once per method finds it there.
 */
const callSlotKey = createContextKey<CallSlot | undefined>(undefined, { description: "the call's handler context" });

/** Puts the call's handler context among its context values. */
export function withCallContext(values: ContextValues, context: CallContext): void {
  values.set(callSlotKey, { context, request: undefined });
}

/**
 * A method's handler behind the interceptors, as this server's own transports call it (REST, the unary
 * fast path). The same steps as Connect-ES's invocation functions, with less made per call: the chain
 * of interceptors is composed once per method (each interceptor makes its step from `next` alone, so
 * one chain serves every call), a server stream's request is handed on as a OneMessage, and its
 * answers are passed on as the handler yields them, where Connect-ES runs each through three nested
 * async generators (issue 40; what this saved: test/bench/README.md, BENCH_ONLY=throughput).
 */
export class MethodInvoker {
  private readonly chain: Next;

  constructor(
    readonly spec: MethodImplSpec,
    interceptors: readonly Interceptor[],
  ) {
    let next = innermost(spec);
    for (let i = interceptors.length - 1; i >= 0; i--) next = interceptors[i]!(next);
    this.chain = next;
  }

  /** A unary call's answer. */
  async unary(context: CallContext, input: Message): Promise<Message> {
    const spec = this.spec;
    if (spec.kind !== "unary") throw notInvoked(spec);
    const req: UnaryRequest = {
      stream: false,
      message: input,
      method: spec.method,
      service: spec.method.parent,
      requestMethod: context.requestMethod,
      url: context.url,
      signal: context.signal,
      header: context.requestHeader,
      contextValues: context.values,
    };
    const res = await this.chain(handedOn(req));
    copyHeaders(res.header, context.responseHeader);
    copyHeaders(res.trailer, context.responseTrailer);
    if (res.stream) throw new ConnectError("a unary call answered a stream", Code.Internal);
    return res.message;
  }

  /**
   * A server stream's answers, once the interceptors and the handler let it begin (a refusal rejects
   * here). Its trailers are the handler context's, which the stream may still set while it runs.
   */
  async serverStream(context: CallContext, input: Message): Promise<AsyncIterable<Message>> {
    const spec = this.spec;
    if (spec.kind !== "server_streaming") throw notInvoked(spec);
    const req: StreamRequest = {
      stream: true,
      message: new OneMessage(input),
      method: spec.method,
      service: spec.method.parent,
      requestMethod: context.requestMethod,
      url: context.url,
      signal: context.signal,
      header: context.requestHeader,
      contextValues: context.values,
    };
    const res = await this.chain(handedOn(req));
    copyHeaders(res.header, context.responseHeader);
    if (!res.stream) throw new ConnectError("a server stream answered one message", Code.Internal);
    return res.message;
  }
}

/** `req`, noted as the one the chain is given. */
function handedOn<R extends Request>(req: R): R {
  slotOf(req).request = req;
  return req;
}

function notInvoked(spec: MethodImplSpec): ConnectError {
  return new ConnectError(`${spec.method.name} is not invoked as a ${spec.kind} call here`, Code.Internal);
}

/** The handler itself: its answer made a message (a handler may answer an init shape), as Connect-ES does. */
function innermost(spec: MethodImplSpec): Next {
  const output = spec.method.output;
  const service = spec.method.parent;
  switch (spec.kind) {
    case "unary":
      return async (req) => {
        const slot = slotOf(req);
        const context = slot.context;
        if (req.stream) throw new ConnectError("a unary call given a stream", Code.Internal);
        const message = create(output, await spec.impl(req.message, handlerContext(slot, req)));
        return { stream: false, message, method: spec.method, service, header: context.responseHeader, trailer: context.responseTrailer };
      };
    case "server_streaming":
      return async (req) => {
        const slot = slotOf(req);
        const context = slot.context;
        if (!req.stream) throw new ConnectError("a server stream given one message", Code.Internal);
        const answers = spec.impl(await onlyMessage(req.message), handlerContext(slot, req));
        const message = messages(output, answers);
        return { stream: true, message, method: spec.method, service, header: context.responseHeader, trailer: context.responseTrailer };
      };
    default:
      return () => Promise.reject(notInvoked(spec));
  }
}

function slotOf(req: Request): CallSlot {
  const slot = req.contextValues.get(callSlotKey);
  if (!slot) throw new ConnectError("a call without its handler context", Code.Internal);
  return slot;
}

/**
 * The handler's context: the call's own when the request reached the handler as the transport made it,
 * else with the headers, signal and values an interceptor handed on (as Connect-ES merges them).
 */
function handlerContext({ context, request }: CallSlot, req: Request): HandlerContext {
  if (request === req) return context;
  return { ...context, service: req.service, requestHeader: req.header, signal: req.signal, values: req.contextValues };
}

/** The one message of a request stream, as Connect-ES requires it of a server stream's. */
async function onlyMessage<T>(stream: AsyncIterable<T>): Promise<T> {
  if (stream instanceof OneMessage) return stream.message;
  const it = stream[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done) throw new ConnectError("protocol error: missing input message for server-streaming method", Code.Unimplemented);
  const second = await it.next();
  if (!second.done) throw new ConnectError("protocol error: received extra input message for server-streaming method", Code.Unimplemented);
  return first.value;
}

/** A handler's answers as messages, each made when it is read. */
function messages<D extends DescMessage>(schema: D, answers: AsyncIterable<MessageInitShape<D>>): AsyncIterable<Message> {
  return {
    [Symbol.asyncIterator]() {
      const it = answers[Symbol.asyncIterator]();
      const made = (r: IteratorResult<MessageInitShape<D>>): IteratorResult<Message> =>
        r.done ? { done: true, value: undefined } : { done: false, value: create(schema, r.value) };
      return {
        next: () => it.next().then(made),
        return: () => (it.return ? it.return().then(made) : Promise.resolve({ done: true, value: undefined })),
      };
    },
  };
}

function copyHeaders(from: Headers, to: Headers): void {
  if (from === to) return;
  to.forEach((_, key) => {
    to.delete(key);
  });
  from.forEach((value, key) => {
    to.set(key, value);
  });
}
