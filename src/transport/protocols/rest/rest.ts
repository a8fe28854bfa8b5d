import type http from "node:http";
import type http2 from "node:http2";
import { create, type DescMethod, type Message } from "@bufbuild/protobuf";
import type { ConnectNodeAdapterOptions } from "@connectrpc/connect-node";
import type { ContextValues, Interceptor } from "@connectrpc/connect";
import { invokeUnaryImplementation, transformInvokeImplementation } from "@connectrpc/connect/protocol";
import { Code, ConnectError } from "@connectrpc/connect";
import type { HttpBody } from "../../../../gen/es/google/api/httpbody_pb.js";
import { createCallContext, nodeHeaders, type CallContext } from "../../call/call-context.js";
import { errorLine, restError, toRestError, type RestError } from "./errors.js";
import { Fault } from "../../../errors/fault.js";
import { codeOf } from "../../../errors/mapping.js";
import { decodeRequest, isHttpBody, type RequestParts } from "./request-decoder.js";
import { encodeUnary, ndjsonLine } from "./response-writer.js";
import type { Route, RouteTable } from "./route-table.js";
import { readWholeBody } from "../read-body.js";
import { uploadMessages } from "./upload-stream.js";
import { refusedRequest, ResponseMeter, responseMeterKey, type RefusedCall } from "../../call/response-meter.js";

type Req = http.IncomingMessage | http2.Http2ServerRequest;
/** What the edge needs of an HTTP/1 or HTTP/2 response (their write() signatures differ). */
interface Res {
  readonly headersSent: boolean;
  writeHead(status: number, headers: Record<string, string>): unknown;
  write(chunk: string | Uint8Array): boolean;
  end(data?: string | Uint8Array): unknown;
  destroy(): unknown;
  once(event: "close" | "drain", fn: () => void): unknown;
  off(event: "close" | "drain", fn: () => void): unknown;
}

export interface RestEdgeOptions {
  readonly table: RouteTable;
  readonly interceptors: readonly Interceptor[];
  /** The context values a call starts with, as connect-node's `contextValues` (the same function). */
  readonly contextValues: (req: Req) => ContextValues;
  /** Largest non-upload request body; 413 past it. */
  readonly maxBodyBytes: number;
  readonly maxUploadBytes: number;
  readonly shutdownSignal: AbortSignal;
  readonly onInternalError: (err: unknown) => void;
  /** Told of each request the edge answered itself, which no interceptor saw (the call observer records it). */
  readonly refused?: (call: RefusedCall) => void;
}

/**
 * The REST/JSON edge: finds the RPC bound to a method and path by its google.api.http annotation,
 * builds the request message from path, query, headers and body, runs the RPC through the same
 * interceptors and handlers as gRPC and Connect (Connect's own invocation functions, no extra
 * transport hop), and writes the answer. Raw bodies (HttpBody) stay bytes both ways.
 */
type NodeHandlerFn = NonNullable<ConnectNodeAdapterOptions["fallback"]>;

/** The abort reason of a call that ended normally: shared, since an abort without one builds a DOMException per call. */
const CALL_ENDED = new ConnectError("call ended", Code.Canceled);

export function createRestHandler(opts: RestEdgeOptions): NodeHandlerFn {
  const interceptors = [...opts.interceptors];
  return (req, anyRes) => {
    const res = new MeteredResponse(anyRes as unknown as Res, req, opts.refused);
    handle(req, res).catch((err) => {
      res.refusal = codeOf(err);
      if (!res.headersSent) send(res, toRestError(err, opts.onInternalError));
      else res.destroy();
    });
  };

  async function handle(req: Req, res: MeteredResponse): Promise<void> {
    const rawUrl = req.url ?? "/";
    const q = rawUrl.indexOf("?");
    const path = q < 0 ? rawUrl : rawUrl.slice(0, q);
    const httpMethod = req.method ?? "GET";
    const found = opts.table.lookup(httpMethod, path);
    if (!found) {
      res.refusal = Code.NotFound;
      return send(res, restError(Code.NotFound, `No resource at ${httpMethod} ${path}`));
    }
    if (!("route" in found)) {
      res.refusal = Code.Unimplemented;
      const e = restError(Code.Unimplemented, `Method ${httpMethod} is not allowed on ${path}`, 405);
      return send(res, { ...e, headers: { ...e.headers, allow: found.allowed.join(", ") } });
    }
    const { route, vars } = found;
    res.rpc = route.spec.method;
    const host = (req.headers.host ?? req.headers[":authority"] ?? "localhost") as string;
    const baseUrl = `http://${host}`;
    const context = createCallContext({
      method: route.spec.method,
      protocolName: "rest",
      requestMethod: httpMethod,
      url: baseUrl + rawUrl,
      requestHeader: nodeHeaders(req.headers),
      shutdownSignal: opts.shutdownSignal,
      values: opts.contextValues(req),
    });
    context.values.set(responseMeterKey, res.meter);
    const parts: RequestParts = {
      vars,
      query: q < 0 ? undefined : new URLSearchParams(rawUrl.slice(q + 1)),
      header: (name) => context.requestHeader.get(name) ?? undefined,
    };
    // The handler's signal fires when the client leaves early, and (as in Connect's own handlers)
    // when the call is over, which also unhooks it from the shutdown signal.
    res.once("close", () => {
      if (!context.signal.aborted) context.abort(new ConnectError("client went away", Code.Canceled));
    });
    try {
      await dispatch(req, res, route, parts, context, baseUrl);
    } finally {
      context.abort(CALL_ENDED);
    }
  }

  async function dispatch(req: Req, res: Res, route: Route, parts: RequestParts, context: CallContext, baseUrl: string): Promise<void> {
    switch (route.spec.kind) {
      case "unary": {
        const input = decodeRequest(route, parts, await readBody(req, route, opts.maxBodyBytes), contentTypeOf(req));
        const output = await invokeUnaryImplementation(route.spec, context, input, interceptors);
        return sendUnary(res, encodeUnary(route, output, context.responseHeader, baseUrl));
      }
      case "server_streaming": {
        const input = decodeRequest(route, parts, await readBody(req, route, opts.maxBodyBytes), contentTypeOf(req));
        const output = transformInvokeImplementation(route.spec, context, interceptors)(single(input));
        return streamOut(route, output, context.responseHeader, res);
      }
      case "client_streaming": {
        const input = uploadMessages(route, req, parts, opts.maxUploadBytes);
        const outputs = transformInvokeImplementation(route.spec, context, interceptors)(input);
        let output: Message | undefined;
        for await (const m of outputs) output = m;
        return sendUnary(res, encodeUnary(route, output ?? create(route.spec.method.output), context.responseHeader, baseUrl));
      }
      default:
        throw new ConnectError("bidirectional streams are not served over REST", Code.Unimplemented);
    }
  }

  /**
   * Server streams: raw bytes when the response body is an HttpBody (downloads), newline-delimited
   * JSON otherwise. The status is sent with the first message, so an error raised before it (not
   * found, refused) still answers with its own status.
   */
  async function streamOut(route: Route, output: AsyncIterable<Message>, responseHeader: Headers, res: Res): Promise<void> {
    const it = output[Symbol.asyncIterator]();
    const rb = route.responseBody;
    const raw = rb !== undefined && rb.kind === "field" && isHttpBody(rb) ? rb : undefined;
    const first = await it.next();
    const headers: Record<string, string> = {};
    responseHeader.forEach((v, k) => (headers[k] = v));
    try {
      if (raw) {
        const firstBody = first.done ? undefined : ((first.value as unknown as Record<string, HttpBody>)[raw.localName]);
        headers["content-type"] = firstBody?.contentType || "application/octet-stream";
        res.writeHead(200, headers);
        for (let r = first; !r.done; r = await it.next()) {
          const hb = (r.value as unknown as Record<string, HttpBody | undefined>)[raw.localName];
          if (hb && hb.data.length > 0 && !res.write(hb.data)) await drained(res);
        }
        res.end();
        return;
      }
      headers["content-type"] = "application/x-ndjson";
      res.writeHead(200, headers);
      const schema = route.spec.method.output;
      try {
        for (let r = first; !r.done; r = await it.next()) {
          if (!res.write(ndjsonLine(schema, r.value, route))) await drained(res);
        }
      } catch (err) {
        res.write(errorLine(err, opts.onInternalError));
      }
      res.end();
    } finally {
      await it.return?.();
    }
  }
}

/**
 * The response as the edge writes it, counted for the access log and the metrics: its status and body
 * bytes. Finished when its body ends, it is destroyed or its connection closes; a request the edge
 * answered without running its RPC (no route, 405, a body too large or that does not decode) is then
 * reported to the call observer as refused, since the interceptors never saw it.
 */
class MeteredResponse implements Res {
  readonly meter = new ResponseMeter();
  private readonly started = performance.now();
  private finished = false;
  /** The RPC the request was routed to, once known. */
  rpc: DescMethod | undefined;
  /** The code of the edge's error answer, when it gave one. */
  refusal: Code | undefined;

  constructor(private readonly res: Res, private readonly req: Req, private readonly refused: ((call: RefusedCall) => void) | undefined) {
    res.once("close", () => this.finish());
  }

  get headersSent(): boolean {
    return this.res.headersSent;
  }

  writeHead(status: number, headers: Record<string, string>): unknown {
    this.meter.status = status;
    return this.res.writeHead(status, headers);
  }

  write(chunk: string | Uint8Array): boolean {
    this.meter.bytesOut += byteLength(chunk);
    return this.res.write(chunk);
  }

  end(data?: string | Uint8Array): unknown {
    if (data !== undefined) this.meter.bytesOut += byteLength(data);
    const r = this.res.end(data);
    this.finish();
    return r;
  }

  destroy(): unknown {
    const r = this.res.destroy();
    this.finish();
    return r;
  }

  once(event: "close" | "drain", fn: () => void): unknown {
    return this.res.once(event, fn);
  }

  off(event: "close" | "drain", fn: () => void): unknown {
    return this.res.off(event, fn);
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.meter.finish();
    if (!this.refused || this.meter.observed) return;
    this.refused({
      ...refusedRequest(this.req),
      method: this.rpc,
      protocol: "rest",
      code: this.refusal ?? Code.Unknown,
      httpStatus: this.meter.status === 0 ? undefined : this.meter.status,
      started: this.started,
      bytesOut: this.meter.bytesOut,
    });
  }
}

function byteLength(chunk: string | Uint8Array): number {
  return typeof chunk === "string" ? Buffer.byteLength(chunk) : chunk.byteLength;
}

function send(res: Res, e: RestError): void {
  if (res.headersSent) return void res.destroy();
  sendUnary(res, { status: e.status, headers: e.headers, body: { data: e.body } });
}

function sendUnary(res: Res, a: { status: number; headers: Record<string, string>; body: { data: string | Uint8Array } }): void {
  const data = a.body.data;
  if (a.status !== 204) a.headers["content-length"] = String(typeof data === "string" ? Buffer.byteLength(data) : data.length);
  res.writeHead(a.status, a.headers);
  res.end(data);
}

function single(m: Message): AsyncIterable<Message> {
  return (async function* () {
    yield m;
  })();
}

function drained(res: Res): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.once("drain", done);
    res.once("close", done);
  });
}

function contentTypeOf(req: Req): string {
  return (req.headers["content-type"] as string | undefined) ?? "";
}

/** The whole body of a non-upload request; routes without a body skip reading what a client may still send. */
function readBody(req: Req, route: Route, limit: number): Promise<Buffer | undefined> {
  if (!route.bodyField) {
    req.resume();
    return Promise.resolve(undefined);
  }
  return readWholeBody(req, limit, () => tooLarge(limit));
}

function tooLarge(limit: number): Fault {
  return new Fault("too_large", `Request body exceeds the limit of ${limit} bytes`);
}
