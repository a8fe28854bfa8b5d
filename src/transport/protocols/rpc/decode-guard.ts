import { fromBinary, type DescMessage, type Message } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import {
  compressedFlag,
  readAllBytes,
  type Compression,
  type UniversalHandler,
  type UniversalServerRequest,
} from "@connectrpc/connect/protocol";

/**
 * Connect-ES reports a request message that does not decode as INTERNAL ("parse binary: …"), as if
 * the server were at fault; it is the client's (INVALID_ARGUMENT, HTTP 400), as connect-go and grpc-go
 * say. JSON messages already fail that way; binary ones are fixed here, in two places because Connect
 * decodes a unary request before any interceptor runs, and a stream's messages inside them.
 */

/** Binary gRPC and gRPC-Web: the body is enveloped messages. */
const ENVELOPED_BINARY = /^application\/grpc(-web)?(\+proto)?\s*(;|$)/i;
/** A binary Connect unary request: the body is the message itself. */
const CONNECT_BINARY = /^application\/proto\s*(;|$)/i;
const ENVELOPE_HEADER_BYTES = 5;

export interface DecodeGuardOptions {
  readonly readMaxBytes: number;
  /** The compressions the adapter accepts (a request may use one of them). */
  readonly compressions: readonly Compression[];
}

/**
 * A unary RPC handler that decodes the binary request message once before Connect does and refuses
 * one that does not decode with INVALID_ARGUMENT, answered in the request's own protocol (the error
 * is raised from the request body Connect reads). A unary body is read whole by Connect anyway; the
 * second decoding of a small message costs microseconds.
 */
export function guardUnaryDecoding(handler: UniversalHandler, opts: DecodeGuardOptions): UniversalHandler {
  if (handler.method.methodKind !== "unary") return handler;
  const guarded = (req: UniversalServerRequest) => {
    const type = req.header.get("content-type") ?? "";
    const enveloped = ENVELOPED_BINARY.test(type);
    if (!isByteStream(req.body) || (!enveloped && !CONNECT_BINARY.test(type))) return handler(req);
    const encoding = req.header.get(enveloped ? "grpc-encoding" : "content-encoding");
    const check: BodyCheck = {
      schema: handler.method.input,
      enveloped,
      // A connect unary body is compressed as a whole, an enveloped message says so in its flags.
      encoded: !enveloped && encoding !== null && encoding !== "identity",
      compression: opts.compressions.find((c) => c.name === encoding),
      readMaxBytes: opts.readMaxBytes,
    };
    return handler({ ...req, body: checkedBody(req.body, check, req.header.get("content-length")) });
  };
  return Object.assign(guarded, handler);
}

interface BodyCheck {
  readonly schema: DescMessage;
  readonly enveloped: boolean;
  readonly encoded: boolean;
  readonly compression: Compression | undefined;
  readonly readMaxBytes: number;
}

function isByteStream(body: unknown): body is AsyncIterable<Uint8Array> {
  return typeof body === "object" && body !== null && Symbol.asyncIterator in body;
}

async function* checkedBody(body: AsyncIterable<Uint8Array>, c: BodyCheck, lengthHint: string | null): AsyncGenerator<Uint8Array> {
  const limit = c.enveloped ? c.readMaxBytes + ENVELOPE_HEADER_BYTES : c.readMaxBytes;
  let head: Uint8Array | undefined;
  const watched = (async function* () {
    for await (const chunk of body) {
      head ??= chunk;
      yield chunk;
    }
  })();
  const bytes = await readAllBytes(c.enveloped ? watched : body, limit, c.enveloped ? null : lengthHint).catch((e: unknown) => {
    // The limit read here includes the envelope's header: the client is told what Connect-ES itself
    // says of an envelope too large, the size its header declares.
    if (!c.enveloped || !(e instanceof ConnectError) || e.code !== Code.ResourceExhausted) throw e;
    const size =
      head !== undefined && head.length >= ENVELOPE_HEADER_BYTES ? ` ${new DataView(head.buffer, head.byteOffset).getUint32(1)}` : "";
    throw new ConnectError(`message size${size} is larger than configured readMaxBytes ${c.readMaxBytes}`, Code.ResourceExhausted);
  });
  const messages = c.enveloped ? envelopes(bytes) : [{ compressed: c.encoded, data: bytes }];
  for (const m of messages) {
    let data = m.data;
    if (m.compressed) {
      // An encoding Connect does not know, or a compressed message without one: Connect says so itself.
      if (c.compression === undefined) break;
      data = await c.compression.decompress(data, c.readMaxBytes);
    }
    decodes(c.schema, data);
  }
  yield bytes;
}

/** The complete envelopes of a body (Connect itself reports a truncated one). */
function envelopes(bytes: Uint8Array): { compressed: boolean; data: Uint8Array }[] {
  const out: { compressed: boolean; data: Uint8Array }[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = 0; at + ENVELOPE_HEADER_BYTES <= bytes.length; ) {
    const end = at + ENVELOPE_HEADER_BYTES + view.getUint32(at + 1);
    if (end > bytes.length) break;
    out.push({ compressed: (bytes[at]! & compressedFlag) === compressedFlag, data: bytes.subarray(at + ENVELOPE_HEADER_BYTES, end) });
    at = end;
  }
  return out;
}

function decodes(schema: DescMessage, data: Uint8Array): void {
  try {
    fromBinary(schema, data);
  } catch (e) {
    throw new ConnectError(`Request message does not decode: ${(e as Error).message}`, Code.InvalidArgument);
  }
}

/**
 * Streams: a message that does not decode fails while the handler reads the request stream, inside
 * the interceptors. Connect raises nothing else as INTERNAL from reading a request (limits are
 * RESOURCE_EXHAUSTED, bad framing INVALID_ARGUMENT), so INTERNAL from there is the client's fault.
 */
export const streamDecodeErrors: Interceptor = (next) => (req) =>
  req.stream ? next({ ...req, message: clientFaults(req.message) }) : next(req);

async function* clientFaults(messages: AsyncIterable<Message>): AsyncGenerator<Message> {
  try {
    yield* messages;
  } catch (e) {
    if (!(e instanceof ConnectError) || e.code !== Code.Internal) throw e;
    throw new ConnectError(e.rawMessage, Code.InvalidArgument, e.metadata, undefined, e);
  }
}
