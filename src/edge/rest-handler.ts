import type http from "node:http";
import type http2 from "node:http2";
import { create, type Message } from "@bufbuild/protobuf";
import type { ConnectNodeAdapterOptions } from "@connectrpc/connect-node";
import type { Interceptor } from "@connectrpc/connect";
import { invokeUnaryImplementation, transformInvokeImplementation } from "@connectrpc/connect/protocol";
import { Code, ConnectError } from "@connectrpc/connect";
import type { HttpBody } from "../../gen/es/google/api/httpbody_pb.js";
import { createCallContext, type CallContext } from "./call-context.js";
import { errorLine, restError, toRestError, type RestError } from "./errors.js";
import { decodeRequest, isHttpBody, type RequestParts } from "./request-decoder.js";
import { encodeUnary, ndjsonLine } from "./response-writer.js";
import type { Route, RouteTable } from "./route-table.js";
import { uploadMessages } from "./upload-stream.js";
import { HTTP_CODE_HEADER } from "../server/rest-hints.js";

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
  /** Largest non-upload request body; 413 past it. */
  readonly maxBodyBytes: number;
  readonly maxUploadBytes: number;
  readonly shutdownSignal: AbortSignal;
  readonly onInternalError: (err: unknown) => void;
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
    const res = anyRes as unknown as Res;
    handle(req, res).catch((err) => {
      if (!res.headersSent) send(res, toRestError(err, opts.onInternalError));
      else res.destroy();
    });
  };

  async function handle(req: Req, res: Res): Promise<void> {
    const rawUrl = req.url ?? "/";
    const q = rawUrl.indexOf("?");
    const path = q < 0 ? rawUrl : rawUrl.slice(0, q);
    const httpMethod = req.method ?? "GET";
    const found = opts.table.lookup(httpMethod, path);
    if (!found) return send(res, restError(Code.NotFound, `No resource at ${httpMethod} ${path}`));
    if (!("route" in found)) {
      const e = restError(Code.Unimplemented, `Method ${httpMethod} is not allowed on ${path}`, undefined, 405);
      return send(res, { ...e, headers: { ...e.headers, allow: found.allowed.join(", ") } });
    }
    const { route, vars } = found;
    const host = (req.headers.host ?? req.headers[":authority"] ?? "localhost") as string;
    const baseUrl = `http://${host}`;
    const context = createCallContext({
      method: route.spec.method,
      requestMethod: httpMethod,
      url: baseUrl + rawUrl,
      requestHeader: headerRecord(req.headers),
      shutdownSignal: opts.shutdownSignal,
      clientAddress: req.socket.remoteAddress,
    });
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

/** Node's headers as Connect takes them (it builds its own Headers from this). */
function headerRecord(h: http.IncomingHttpHeaders): [string, string][] {
  const out: [string, string][] = [];
  for (const k in h) {
    if (k.charCodeAt(0) === 58 /* ':' pseudo-headers of HTTP/2 */) continue;
    const v = h[k];
    if (Array.isArray(v)) for (const x of v) out.push([k, x]);
    else if (v !== undefined) out.push([k, v]);
  }
  return out;
}

/**
 * The whole body of a non-upload request, up to `limit` bytes. Listens to the stream's events rather
 * than iterating it: an async iterator over the request costs more than the rest of a small call.
 * Routes without a body skip reading what a client may still send.
 */
function readBody(req: Req, route: Route, limit: number): Promise<Buffer | undefined> {
  if (!route.bodyField) {
    req.resume();
    return Promise.resolve(undefined);
  }
  const declared = Number(req.headers["content-length"] ?? NaN);
  if (declared > limit) return Promise.reject(tooLarge(req, limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (): void => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onFail);
      req.off("close", onFail);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      settle();
      reject(tooLarge(req, limit));
    };
    const onEnd = (): void => {
      settle();
      resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    };
    // An error here is the client's connection ending early ("aborted"), not a fault of the server.
    const onFail = (): void => {
      settle();
      reject(new ConnectError("client went away before sending the whole body", Code.Canceled));
    };
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onFail);
    req.once("close", onFail);
  });
}

function tooLarge(req: Req, limit: number): ConnectError {
  // The rest of the body is read and dropped while the 413 goes out: a socket closed with unread
  // bytes is reset, and the client may lose the answer. The listener bounds how long this may take.
  req.resume();
  return new ConnectError(`Request body exceeds the limit of ${limit} bytes`, Code.ResourceExhausted, { [HTTP_CODE_HEADER]: "413" });
}
