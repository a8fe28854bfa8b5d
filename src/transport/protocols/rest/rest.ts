import { create, type Message } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { transformInvokeImplementation } from "@connectrpc/connect/protocol";
import { Code, ConnectError } from "@connectrpc/connect";
import type { CallContext } from "../../call/call-context.js";
import type { Call, CallKernel } from "../../call/call-kernel.js";
import { MethodInvoker } from "../../call/invoke.js";
import type { ServerRequest, ServerResponse } from "../../http.js";
import { errorLine, restError, toRestError, type RestError } from "./errors.js";
import { Fault } from "../../../errors/fault.js";
import { codeOf } from "../../../errors/mapping.js";
import { decodeRequest, type RequestParts } from "./request-decoder.js";
import { encodeUnary, httpBodyIn, ndjsonLine, rawBodyField } from "./response-writer.js";
import { pathVars } from "./path-template.js";
import type { Route } from "./route-table.js";
import { readWholeBody } from "../read-body.js";
import { uploadMessages } from "./upload-stream.js";

export interface RestOptions {
  readonly interceptors: readonly Interceptor[];
  readonly kernel: CallKernel;
  /** Largest non-upload request body; 413 past it. */
  readonly maxBodyBytes: number;
  readonly maxUploadBytes: number;
  readonly onInternalError: (err: unknown) => void;
}

/** REST as the front router hands it requests: a route it found, or none. */
export interface Rest {
  /** A request of `route`; `parts`, its path split at `/` (the front router matched them). */
  serve(req: ServerRequest, res: ServerResponse, route: Route, parts: readonly string[]): void;
  /** A path no route takes: 404. */
  notFound(req: ServerRequest, res: ServerResponse, path: string): void;
  /** A path routes take, none with the request's method: 405, with the methods they have. */
  notAllowed(req: ServerRequest, res: ServerResponse, path: string, methods: readonly string[]): void;
}

/**
 * The REST/JSON edge: builds the request message of the RPC a route binds by its google.api.http
 * annotation from path, query, headers and body, runs the RPC through the same interceptors and
 * handlers as gRPC and Connect (the call kernel's invoke.ts; Connect-ES's own invocation for a client
 * stream; no extra transport hop), and
 * writes the answer. Raw bodies (HttpBody) stay bytes both ways. Every answer's status and body bytes
 * go into the call's meter; a request answered without running its RPC (no route, 405, a path that
 * does not decode, a body too large or that does not decode) is reported refused, since no
 * interceptor saw it.
 */
export function createRest(opts: RestOptions): Rest {
  const interceptors = [...opts.interceptors];
  const kernel = opts.kernel;
  // One per method, made at its first call (a method may have several routes).
  const invokers = new Map<Route["spec"], MethodInvoker>();
  const invokerOf = (route: Route): MethodInvoker => {
    let invoker = invokers.get(route.spec);
    if (!invoker) invokers.set(route.spec, (invoker = new MethodInvoker(route.spec, interceptors)));
    return invoker;
  };
  /** An answer given before the request reached any RPC. */
  const refuse = (req: ServerRequest, res: ServerResponse, code: Code, e: RestError): void => {
    const started = performance.now();
    const bytesOut = send(res, e);
    kernel.refuse(req, { method: undefined, protocol: "rest", code, httpStatus: e.status, started, bytesOut });
  };

  return {
    serve(req, res, route, parts) {
      let vars: Map<string, string>;
      try {
        vars = pathVars(route.template, parts);
      } catch (err) {
        return refuse(req, res, codeOf(err), toRestError(err, opts.onInternalError));
      }
      const rawUrl = req.url ?? "/";
      const q = rawUrl.indexOf("?");
      const host = (req.headers.host ?? req.headers[":authority"] ?? "localhost") as string;
      const baseUrl = `http://${host}`;
      const call = kernel.open(req, res, { method: route.spec.method, protocol: "rest", url: baseUrl + rawUrl, reportsRefusal: true });
      const requestParts: RequestParts = {
        vars,
        query: q < 0 ? undefined : new URLSearchParams(rawUrl.slice(q + 1)),
        header(name) {
          return call.context.requestHeader.get(name) ?? undefined;
        },
      };
      serve(req, res, call, route, requestParts, baseUrl).catch((err: unknown) => {
        call.refusal = codeOf(err);
        if (res.headersSent) return destroy(res, call);
        const e = toRestError(err, opts.onInternalError);
        call.status = e.status;
        call.bytesOut += send(res, e);
        call.finish();
      });
    },
    notFound(req, res, path) {
      refuse(req, res, Code.NotFound, restError(Code.NotFound, `No resource at ${req.method ?? "GET"} ${path}`));
    },
    notAllowed(req, res, path, methods) {
      const e = restError(Code.Unimplemented, `Method ${req.method ?? "GET"} is not allowed on ${path}`, 405);
      refuse(req, res, Code.Unimplemented, { ...e, headers: { ...e.headers, allow: methods.join(", ") } });
    },
  };

  /** Runs the call the route names and answers it; the call ends (its signal with it) once it is answered. */
  async function serve(
    req: ServerRequest,
    res: ServerResponse,
    call: Call,
    route: Route,
    parts: RequestParts,
    baseUrl: string,
  ): Promise<void> {
    try {
      const context = call.context;
      switch (route.spec.kind) {
        case "unary": {
          const input = decodeRequest(route, parts, await readBody(req, route, opts.maxBodyBytes), contentTypeOf(req));
          const output = await invokerOf(route).unary(context, input);
          return sendAnswer(res, call, encodeUnary(route, output, context.responseHeader, baseUrl), req.method === "HEAD");
        }
        case "server_streaming": {
          const input = decodeRequest(route, parts, await readBody(req, route, opts.maxBodyBytes), contentTypeOf(req));
          const output = await invokerOf(route).serverStream(context, input);
          return await streamOut(route, output, context, res, call, baseUrl, req.method === "HEAD");
        }
        case "client_streaming": {
          const input = uploadMessages(route, req, parts, opts.maxUploadBytes);
          const outputs = transformInvokeImplementation(route.spec, context, interceptors)(input);
          let output: Message | undefined;
          for await (const m of outputs) output = m;
          return sendAnswer(res, call, encodeUnary(route, output ?? create(route.spec.method.output), context.responseHeader, baseUrl));
        }
        default:
          throw new ConnectError("bidirectional streams are not served over REST", Code.Unimplemented);
      }
    } finally {
      call.end();
    }
  }

  /**
   * Server streams: raw bytes when the response body is an HttpBody (downloads, evaluations), newline-
   * delimited JSON otherwise. The status is sent with the first message, so an error raised before it
   * (not found, refused) still answers with its own status. A raw stream of one message is answered
   * whole, with its length; a message whose response body is not the HttpBody (an async call's
   * command) is answered as a unary call's. A HEAD (`headOnly`) ends at the headers, which stops the
   * stream: a download reads no more of its file, a followed log tail waits for nothing.
   */
  async function streamOut(
    route: Route,
    output: AsyncIterable<Message>,
    context: CallContext,
    res: ServerResponse,
    call: Call,
    baseUrl: string,
    headOnly: boolean,
  ): Promise<void> {
    const it = output[Symbol.asyncIterator]();
    const raw = rawBodyField(route);
    const schema = route.spec.method.output;
    const first = await it.next();
    const headers: Record<string, string> = {};
    context.responseHeader.forEach((v, k) => {
      headers[k] = v;
    });
    const write = async (chunk: string | Uint8Array): Promise<void> => {
      call.bytesOut += byteLength(chunk);
      if (!res.write(chunk)) await drained(res);
    };
    try {
      if (raw) {
        const body = first.done ? undefined : httpBodyIn(schema, first.value, raw);
        if (!first.done && body === undefined && route.responseBody?.kind === "oneof") {
          sendAnswer(res, call, encodeUnary(route, first.value, context.responseHeader, baseUrl), headOnly);
          // That one message is the answer (an async eval's command): a stream that ends after it ended
          // as it should, not given up by a client that left (the access line's 201, not 499).
          await it.next();
          return;
        }
        headers["content-type"] = body?.contentType || "application/octet-stream";
        const second = first.done ? first : await it.next();
        if (second.done) return sendAnswer(res, call, { status: 200, headers, body: { data: body?.data ?? "" } }, headOnly);
        writeHead(res, call, 200, headers);
        if (headOnly) return end(res, call);
        for (let r: IteratorResult<Message> = first; !r.done; r = r === first ? second : await it.next()) {
          const hb = httpBodyIn(schema, r.value, raw);
          if (hb && hb.data.length > 0) await write(hb.data);
        }
        return end(res, call);
      }
      headers["content-type"] = "application/x-ndjson";
      writeHead(res, call, 200, headers);
      if (headOnly) return end(res, call);
      try {
        for (let r = first; !r.done; r = await it.next()) await write(ndjsonLine(schema, r.value, route));
      } catch (err) {
        const line = errorLine(err, opts.onInternalError);
        call.bytesOut += byteLength(line);
        res.write(line);
      }
      end(res, call);
    } finally {
      await it.return?.();
    }
  }
}

function byteLength(chunk: string | Uint8Array): number {
  return typeof chunk === "string" ? Buffer.byteLength(chunk) : chunk.byteLength;
}

function writeHead(res: ServerResponse, call: Call, status: number, headers: Record<string, string>): void {
  call.status = status;
  res.writeHead(status, headers);
}

function end(res: ServerResponse, call: Call): void {
  res.end();
  call.finish();
}

function destroy(res: ServerResponse, call: Call): void {
  res.destroy();
  call.finish();
}

/** An error answer; its body bytes. */
function send(res: ServerResponse, e: RestError): number {
  return writeWhole(res, e.status, e.headers, e.body);
}

/** A whole answer; to a HEAD, its headers alone (GET's Content-Length among them), and no byte of body counted. */
function sendAnswer(
  res: ServerResponse,
  call: Call,
  a: { status: number; headers: Record<string, string>; body: { data: string | Uint8Array } },
  headOnly = false,
): void {
  call.status = a.status;
  const length = writeWhole(res, a.status, a.headers, a.body.data);
  if (!headOnly) call.bytesOut += length;
  call.finish();
}

/** Writes a whole answer; its body bytes. */
function writeWhole(res: ServerResponse, status: number, headers: Record<string, string>, data: string | Uint8Array): number {
  const length = byteLength(data);
  if (status !== 204) headers["content-length"] = String(length);
  res.writeHead(status, headers);
  res.end(data);
  return length;
}

function drained(res: ServerResponse): Promise<void> {
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

function contentTypeOf(req: ServerRequest): string {
  return req.headers["content-type"] ?? "";
}

/** The whole body of a non-upload request; routes without a body skip reading what a client may still send. */
function readBody(req: ServerRequest, route: Route, limit: number): Promise<Buffer | undefined> {
  if (!route.bodyField) {
    req.resume();
    return Promise.resolve(undefined);
  }
  return readWholeBody(req, limit, () => tooLarge(limit));
}

function tooLarge(limit: number): Fault {
  return new Fault("too_large", `Request body exceeds the limit of ${limit} bytes`);
}
