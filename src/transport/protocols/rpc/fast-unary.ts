import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor, type MethodImplSpec, type ServiceImplSpec } from "@connectrpc/connect";
import { compressedFlag, compressionNegotiate, invokeUnaryImplementation, type Compression } from "@connectrpc/connect/protocol";
import * as connect from "@connectrpc/connect/protocol-connect";
import * as grpc from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import type { CallContext } from "../../call/call-context.js";
import type { CallKernel } from "../../call/call-kernel.js";
import { pathOf, type ServerRequest, type ServerResponse } from "../../http.js";
import { dropUnreadBody, readWholeBody } from "../read-body.js";
import { encodeGrpcMessage } from "./grpc-message.js";
import { envelope, ENVELOPE_HEADER_BYTES, isGrpcFamily, MethodCodec, singleEnvelope, wireOf, type Wire } from "./wire.js";

export interface UnaryFastPathOptions {
  readonly services: readonly { readonly desc: DescService; readonly spec: ServiceImplSpec }[];
  readonly interceptors: readonly Interceptor[];
  readonly kernel: CallKernel;
  /** Largest request message, after decompression. */
  readonly readMaxBytes: number;
  readonly compressions: readonly Compression[];
  /** A fault of the server (not a ConnectError): logged; the client is told "internal error". */
  readonly onInternalError: (err: unknown) => void;
}

/** Takes the request (true) or leaves it to the next handler (false). */
export type FastPath = (req: ServerRequest, res: ServerResponse) => boolean;

/** Connect-ES compresses messages from this size on (its default, so both paths answer alike). */
const COMPRESS_MIN_BYTES = 1024;
interface Method {
  readonly spec: MethodImplSpec & { kind: "unary" };
  readonly codec: MethodCodec;
}

/**
 * Unary RPCs over gRPC, gRPC-Web and Connect on a fast path beside Connect-ES, the way the REST edge
 * serves REST: the same handlers behind the same interceptors (Connect-ES's own invocation function),
 * with one light call context, the body read by events and the answer written in one go, where
 * Connect-ES runs each call through a chain of async iterables, linked abort signals and the
 * universal request/response layer. Streaming RPCs, Connect GET requests and gRPC-Web text stay with
 * Connect-ES, which is also the reference the tests hold this path to.
 */
export function createUnaryFastPath(opts: UnaryFastPathOptions): FastPath {
  const methods = new Map<string, Method>();
  for (const s of opts.services) {
    const specs = s.spec;
    for (const m of s.desc.methods) {
      const path = `/${s.desc.typeName}/${m.name}`;
      const spec = specs.methods[m.localName];
      if (spec?.kind === "unary") methods.set(path, { spec, codec: new MethodCodec(m) });
    }
  }
  const interceptors = [...opts.interceptors];

  return (req, res) => {
    if (req.method !== "POST") return false;
    const path = pathOf(req.url);
    const method = methods.get(path);
    if (!method) return false;
    const wire = wireOf(req.headers["content-type"], req.httpVersionMajor);
    if (!wire) return false;
    serve(req, res, method, wire).catch((err: unknown) => {
      // Only writing can fail here, and only because the client left.
      if (!res.headersSent) opts.onInternalError(err);
    });
    return true;
  };

  async function serve(req: ServerRequest, res: ServerResponse, method: Method, wire: Wire): Promise<void> {
    const header = req.headers;
    const timeout = (wire.name === "connect" ? connect.parseTimeout : grpc.parseTimeout)(headerValue(header[wire.timeoutHeader]) ?? null, Number.MAX_SAFE_INTEGER);
    const call = opts.kernel.open(req, res, {
      method: method.spec.method,
      protocol: wire.name,
      url: `http://${headerValue(header[":authority"]) ?? headerValue(header.host) ?? "localhost"}${req.url ?? ""}`,
      timeoutMs: timeout.error ? undefined : timeout.timeoutMs,
      reportsRefusal: false,
    });
    const context = call.context;
    const compression = compressionNegotiate(
      [...opts.compressions],
      headerValue(header[wire.encodingHeader]) ?? null,
      headerValue(header[wire.acceptEncodingHeader]) ?? null,
      wire.acceptEncodingHeader,
    );
    let outcome: { ok: Uint8Array } | { error: ConnectError };
    try {
      const work = run(req, method, wire, context, compression, timeout.error);
      outcome = { ok: await (context.timeoutMs() === undefined ? work : Promise.race([work, deadline(context.signal)])) };
    } catch (err) {
      outcome = { error: asConnectError(err, opts.onInternalError) };
    } finally {
      call.end();
    }
    if ("error" in outcome) {
      call.bytesOut += writeError(res, wire, context.responseHeader, context.responseTrailer, outcome.error);
      call.finish();
      return dropUnreadBody(req);
    }
    let body = outcome.ok;
    let compressed = false;
    if (compression.response && body.byteLength >= COMPRESS_MIN_BYTES) {
      body = await compression.response.compress(body);
      compressed = true;
    }
    call.bytesOut += writeMessage(res, wire, context, body, compressed ? compression.response : null, compression.response);
    call.finish();
  }

  async function run(
    req: ServerRequest,
    method: Method,
    wire: Wire,
    context: CallContext,
    compression: ReturnType<typeof compressionNegotiate>,
    badTimeout: ConnectError | undefined,
  ): Promise<Uint8Array> {
    const refusal = compression.error ?? badTimeout;
    if (refusal) {
      req.resume();
      throw refusal;
    }
    const limit = opts.readMaxBytes + (wire.enveloped ? ENVELOPE_HEADER_BYTES : 0);
    // An envelope's own header tells its size, which Connect-ES reports: read up to it.
    const body = await readWholeBody(req, limit, (seen) => tooLarge(wire.enveloped ? declaredSize(seen.head) : seen.declared, opts.readMaxBytes), !wire.enveloped);
    let data: Uint8Array = body;
    let compressed = !wire.enveloped && compression.request !== null;
    if (wire.enveloped) ({ data, compressed } = singleEnvelope(body, opts.readMaxBytes));
    if (compressed) {
      if (!compression.request) throw new ConnectError("received compressed envelope, but do not know how to decompress", Code.Internal);
      data = await compression.request.decompress(data, opts.readMaxBytes);
    }
    const input = method.codec.parse(wire.binary, data);
    const output = await invokeUnaryImplementation(method.spec, context, input, interceptors);
    return method.codec.serialize(wire.binary, output);
  }
}

/** As Connect-ES words it: with the message's size when the request told it. */
function tooLarge(size: number | undefined, readMaxBytes: number): ConnectError {
  const which = size === undefined ? "" : ` ${size}`;
  return new ConnectError(`message size${which} is larger than configured readMaxBytes ${readMaxBytes}`, Code.ResourceExhausted);
}

/** The length an envelope's header declares, when its header came whole. */
function declaredSize(head: Buffer | undefined): number | undefined {
  return head !== undefined && head.length >= ENVELOPE_HEADER_BYTES ? head.readUInt32BE(1) : undefined;
}

/** Fails when the call's deadline passes: the client is answered then, while R is being interrupted. */
function deadline(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const onAbort = (): void => {
      const reason: unknown = signal.reason;
      if (reason instanceof ConnectError && reason.code === Code.DeadlineExceeded) reject(reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function asConnectError(err: unknown, onInternalError: (err: unknown) => void): ConnectError {
  if (err instanceof ConnectError) return err;
  onInternalError(err);
  return new ConnectError("internal error", Code.Internal, undefined, undefined, err);
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(", ") : v;
}

function record(...all: Headers[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of all) h.forEach((v, k) => (out[k] = v));
  return out;
}

/** Writes the answer; the number of body bytes written. */
function writeMessage(res: ServerResponse, wire: Wire, context: CallContext, body: Uint8Array, usedCompression: Compression | null, negotiated: Compression | null): number {
  const head = context.responseHeader;
  head.set("content-type", wire.contentType);
  if (wire.name === "connect") {
    if (usedCompression) head.set(connect.headerUnaryEncoding, usedCompression.name);
    const all = connect.trailerMux(head, context.responseTrailer);
    all.set(connect.headerUnaryContentLength, String(body.byteLength));
    res.writeHead(200, record(all));
    res.end(body);
    return body.byteLength;
  }
  if (negotiated) head.set(wire.encodingHeader, negotiated.name);
  const trailer = context.responseTrailer;
  trailer.set("grpc-status", grpc.grpcStatusOk);
  const message = envelope(usedCompression ? compressedFlag : 0, body);
  if (wire.name === "grpc-web") {
    const all = Buffer.concat([message, envelope(trailerFlag, trailerSerialize(trailer))]);
    res.writeHead(200, record(head));
    res.end(all);
    return all.length;
  }
  res.writeHead(200, record(head));
  res.addTrailers(record(trailer));
  res.end(message);
  return message.length;
}

/**
 * A gRPC or gRPC-Web call of no RPC this server has: UNIMPLEMENTED in the call's own protocol (the
 * REST edge, next in line, would answer an HTTP 404), reported refused, as a call no interceptor saw.
 * False when the request is not such a call.
 */
export function answerUnknownMethod(req: ServerRequest, res: ServerResponse, kernel: CallKernel): boolean {
  const started = performance.now();
  const contentType = req.headers["content-type"];
  if (req.method !== "POST" || !isGrpcFamily(contentType)) return false;
  const wire = wireOf(contentType, req.httpVersionMajor);
  if (!wire) return false;
  req.resume();
  const bytesOut = writeError(res, wire, new Headers(), new Headers(), new ConnectError(`${pathOf(req.url)} is not implemented`, Code.Unimplemented));
  kernel.refuse(req, { method: undefined, protocol: wire.name, code: Code.Unimplemented, httpStatus: undefined, started, bytesOut });
  return true;
}

/** An error in the request's protocol: the Connect JSON error with its HTTP status, or gRPC status trailers; the body bytes written. */
function writeError(res: ServerResponse, wire: Wire, head: Headers, trailer: Headers, error: ConnectError): number {
  if (res.headersSent) return 0;
  if (wire.name === "connect") {
    head.set("content-type", connect.contentTypeUnaryJson);
    error.metadata.forEach((v, k) => head.set(k, v));
    const body = connect.errorToJsonBytes(error, {});
    const all = connect.trailerMux(head, trailer);
    all.set(connect.headerUnaryContentLength, String(body.byteLength));
    res.writeHead(connect.codeToHttpStatus(error.code), record(all));
    res.end(body);
    return body.byteLength;
  }
  head.set("content-type", wire.contentType);
  grpc.setTrailerStatus(trailer, error);
  // gRPC-Web clients (Connect-ES's, grpc-web's) read the message with decodeURIComponent, which
  // takes Connect-ES's wider encoding as well; grpc-js reads gRPC's with decodeURI and needs the spec's.
  if (wire.name === "grpc") trailer.set("grpc-message", encodeGrpcMessage(error.rawMessage));
  if (wire.name === "grpc-web") {
    const body = envelope(trailerFlag, trailerSerialize(trailer));
    res.writeHead(200, record(head));
    res.end(body);
    return body.length;
  }
  res.writeHead(200, record(head));
  res.addTrailers(record(trailer));
  res.end();
  return 0;
}
