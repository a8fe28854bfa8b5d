import { fromBinary, toBinary, type DescMessage, type DescMethod, type Message } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { compressedFlag, createMethodSerializationLookup, type MethodSerializationLookup } from "@connectrpc/connect/protocol";
import * as connect from "@connectrpc/connect/protocol-connect";
import * as grpc from "@connectrpc/connect/protocol-grpc";
import * as grpcWeb from "@connectrpc/connect/protocol-grpc-web";

/**
 * How a unary call travels on each RPC protocol, as the gRPC, gRPC-Web and Connect specifications
 * say and Connect-ES answers (the tests compare both byte for byte): which headers name the encoding,
 * the deadline and the codec, and whether the message is enveloped.
 */
export interface Wire {
  /** As Connect-ES names the protocol (HandlerContext.protocolName). */
  readonly name: "grpc" | "grpc-web" | "connect";
  /** Protobuf binary, or JSON. */
  readonly binary: boolean;
  /** The body is length-prefixed messages (gRPC, gRPC-Web), not the message itself (Connect unary). */
  readonly enveloped: boolean;
  readonly contentType: string;
  /** Request header names, lower case. */
  readonly encodingHeader: string;
  readonly acceptEncodingHeader: string;
  readonly timeoutHeader: string;
}

export const ENVELOPE_HEADER_BYTES = 5;

/** Node gives request header names in lower case; Connect-ES spells its constants capitalized. */
const lower = (name: string): string => name.toLowerCase();

const WIRES = {
  grpc: {
    name: "grpc",
    enveloped: true,
    encodingHeader: lower(grpc.headerEncoding),
    acceptEncodingHeader: lower(grpc.headerAcceptEncoding),
    timeoutHeader: lower(grpc.headerTimeout),
  },
  grpcWeb: {
    name: "grpc-web",
    enveloped: true,
    encodingHeader: lower(grpcWeb.headerEncoding),
    acceptEncodingHeader: lower(grpcWeb.headerAcceptEncoding),
    timeoutHeader: lower(grpcWeb.headerTimeout),
  },
  connect: {
    name: "connect",
    enveloped: false,
    encodingHeader: lower(connect.headerUnaryEncoding),
    acceptEncodingHeader: lower(connect.headerUnaryAcceptEncoding),
    timeoutHeader: lower(connect.headerTimeout),
  },
} as const;

const CACHE = new Map<string, Wire | null>();

/**
 * The wire of a POST by its content type, or undefined when the unary fast path does not serve it (Connect
 * streams, gRPC-Web text, gRPC over HTTP/1.1, anything else): Connect-ES answers those.
 */
export function wireOf(contentType: string | undefined, httpMajor: number): Wire | undefined {
  if (contentType === undefined) return undefined;
  const key = httpMajor === 2 ? contentType : `1 ${contentType}`;
  let wire = CACHE.get(key);
  if (wire === undefined) {
    wire = parse(contentType, httpMajor) ?? null;
    // A client chooses its content type: only the few a client may really send are remembered.
    if (CACHE.size < 64) CACHE.set(key, wire);
  }
  return wire ?? undefined;
}

function parse(contentType: string, httpMajor: number): Wire | undefined {
  if (contentType.toLowerCase().startsWith("application/grpc-web")) {
    const t = grpcWeb.parseContentType(contentType);
    if (!t || t.text) return undefined;
    return { ...WIRES.grpcWeb, binary: t.binary, contentType: t.binary ? grpcWeb.contentTypeProto : grpcWeb.contentTypeJson };
  }
  const g = grpc.parseContentType(contentType);
  if (g)
    return httpMajor === 2
      ? { ...WIRES.grpc, binary: g.binary, contentType: g.binary ? grpc.contentTypeProto : grpc.contentTypeJson }
      : undefined;
  const c = connect.parseContentType(contentType);
  if (c && !c.stream)
    return { ...WIRES.connect, binary: c.binary, contentType: c.binary ? connect.contentTypeUnaryProto : connect.contentTypeUnaryJson };
  return undefined;
}

/** Whether a request speaks gRPC or gRPC-Web (an unknown method answers in its own protocol then). */
export function isGrpcFamily(contentType: string | undefined): boolean {
  return contentType !== undefined && /^application\/grpc/i.test(contentType);
}

/** The messages of an enveloped body; a unary call must carry exactly one. */
export function singleEnvelope(body: Buffer, readMaxBytes: number): { compressed: boolean; data: Uint8Array } {
  if (body.length < ENVELOPE_HEADER_BYTES) {
    if (body.length === 0) throw new ConnectError("protocol error: missing input message for unary method", Code.Unimplemented);
    throw new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
  }
  const size = body.readUInt32BE(1);
  if (size > readMaxBytes)
    throw new ConnectError(`message size ${size} is larger than configured readMaxBytes ${readMaxBytes}`, Code.ResourceExhausted);
  const end = ENVELOPE_HEADER_BYTES + size;
  if (end > body.length) throw new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
  if (end < body.length) throw new ConnectError("protocol error: received extra input message for unary method", Code.Unimplemented);
  return { compressed: (body[0]! & compressedFlag) === compressedFlag, data: body.subarray(ENVELOPE_HEADER_BYTES) };
}

export function envelope(flags: number, data: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(ENVELOPE_HEADER_BYTES + data.length);
  out[0] = flags;
  out.writeUInt32BE(data.length, 1);
  out.set(data, ENVELOPE_HEADER_BYTES);
  return out;
}

/** Reads and writes one method's messages in either codec. */
export class MethodCodec {
  private readonly json: MethodSerializationLookup<DescMessage, DescMessage>;

  constructor(private readonly method: DescMethod) {
    this.json = createMethodSerializationLookup(method, undefined, undefined, { readMaxBytes: 0xffffffff, writeMaxBytes: 0xffffffff });
  }

  /** A message that does not decode is the client's fault (INVALID_ARGUMENT), as connect-go and grpc-go say. */
  parse(binary: boolean, data: Uint8Array): Message {
    if (!binary) return this.json.getI(false).parse(data);
    try {
      return fromBinary(this.method.input, data);
    } catch (e) {
      throw new ConnectError(`Request message does not decode: ${(e as Error).message}`, Code.InvalidArgument);
    }
  }

  serialize(binary: boolean, message: Message): Uint8Array {
    return binary ? toBinary(this.method.output, message) : this.json.getO(false).serialize(message);
  }
}
