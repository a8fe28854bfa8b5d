import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor, type MethodImplSpec, type ServiceImplSpec } from "@connectrpc/connect";
import { compressionNegotiate, type Compression } from "@connectrpc/connect/protocol";
import * as connect from "@connectrpc/connect/protocol-connect";
import * as grpc from "@connectrpc/connect/protocol-grpc";
import type { CallContext } from "../../call/call-context.js";
import type { CallKernel } from "../../call/call-kernel.js";
import { MethodInvoker } from "../../call/invoke.js";
import type { ServerRequest, ServerResponse } from "../../http.js";
import { dropUnreadBody, readWholeBody } from "../read-body.js";
import { writeError, writeMessage } from "./rpc-answer.js";
import { ENVELOPE_HEADER_BYTES, MethodCodec, singleEnvelope, type Wire } from "./wire.js";

export interface FastUnaryOptions {
  readonly services: readonly { readonly desc: DescService; readonly spec: ServiceImplSpec }[];
  readonly interceptors: readonly Interceptor[];
  readonly kernel: CallKernel;
  /** Largest request message, after decompression. */
  readonly readMaxBytes: number;
  readonly compressions: readonly Compression[];
  /** A fault of the server (not a ConnectError): logged; the client is told "internal error". */
  readonly onInternalError: (err: unknown) => void;
}

/** One unary RPC as the fast path serves it. */
export interface FastMethod {
  readonly spec: MethodImplSpec & { kind: "unary" };
  readonly codec: MethodCodec;
  readonly invoker: MethodInvoker;
}

export interface FastUnary {
  /** The unary RPCs it serves, by request path (`/pkg.Service/Method`). */
  readonly methods: ReadonlyMap<string, FastMethod>;
  /** Serves a POST of one of `methods` whose content type is `wire`'s (the front router decided both). */
  serve(req: ServerRequest, res: ServerResponse, method: FastMethod, wire: Wire): void;
}

/** Connect-ES compresses messages from this size on (its default, so both paths answer alike). */
const COMPRESS_MIN_BYTES = 1024;

/**
 * Unary RPCs over gRPC, gRPC-Web and Connect on a fast path beside Connect-ES, the way REST is
 * served: the same handlers behind the same interceptors (invoke.ts, as REST calls them),
 * with one light call context, the body read by events and the answer written in one go, where
 * Connect-ES runs each call through a chain of async iterables, linked abort signals and the
 * universal request/response layer. Streaming RPCs, Connect GET requests and gRPC-Web text stay with
 * Connect-ES, which is also the reference the tests hold this path to.
 */
export function createFastUnary(opts: FastUnaryOptions): FastUnary {
  const methods = new Map<string, FastMethod>();
  for (const s of opts.services) {
    const specs = s.spec;
    for (const m of s.desc.methods) {
      const path = `/${s.desc.typeName}/${m.name}`;
      const spec = specs.methods[m.localName];
      if (spec?.kind === "unary")
        methods.set(path, { spec, codec: new MethodCodec(m), invoker: new MethodInvoker(spec, opts.interceptors) });
    }
  }

  return {
    methods,
    serve(req, res, method, wire) {
      serve(req, res, method, wire).catch((err: unknown) => {
        // Only writing can fail here, and only because the client left.
        if (!res.headersSent) opts.onInternalError(err);
      });
    },
  };

  async function serve(req: ServerRequest, res: ServerResponse, method: FastMethod, wire: Wire): Promise<void> {
    const header = req.headers;
    const timeout = (wire.name === "connect" ? connect.parseTimeout : grpc.parseTimeout)(
      headerValue(header[wire.timeoutHeader]) ?? null,
      Number.MAX_SAFE_INTEGER,
    );
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
    method: FastMethod,
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
    const body = await readWholeBody(
      req,
      limit,
      (seen) => tooLarge(wire.enveloped ? declaredSize(seen.head) : seen.declared, opts.readMaxBytes),
      !wire.enveloped,
    );
    let data: Uint8Array = body;
    let compressed = !wire.enveloped && compression.request !== null;
    if (wire.enveloped) ({ data, compressed } = singleEnvelope(body, opts.readMaxBytes));
    if (compressed) {
      if (!compression.request) throw new ConnectError("received compressed envelope, but do not know how to decompress", Code.Internal);
      data = await compression.request.decompress(data, opts.readMaxBytes);
    }
    const input = method.codec.parse(wire.binary, data);
    const output = await method.invoker.unary(context, input);
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
