import { compressedFlag, type Compression } from "@connectrpc/connect/protocol";
import type { ConnectError } from "@connectrpc/connect";
import * as connect from "@connectrpc/connect/protocol-connect";
import * as grpc from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import type { CallContext } from "../../call/call-context.js";
import type { ServerResponse } from "../../http.js";
import { encodeGrpcMessage } from "./grpc-message.js";
import { envelope, type Wire } from "./wire.js";

function record(...all: Headers[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of all) {
    h.forEach((v, k) => {
      out[k] = v;
    });
  }
  return out;
}

/** Writes a unary call's answer in its protocol; the number of body bytes written. */
export function writeMessage(
  res: ServerResponse,
  wire: Wire,
  context: CallContext,
  body: Uint8Array,
  usedCompression: Compression | null,
  negotiated: Compression | null,
): number {
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

/** An error in the request's protocol: the Connect JSON error with its HTTP status, or gRPC status trailers; the body bytes written. */
export function writeError(res: ServerResponse, wire: Wire, head: Headers, trailer: Headers, error: ConnectError): number {
  if (res.headersSent) return 0;
  if (wire.name === "connect") {
    head.set("content-type", connect.contentTypeUnaryJson);
    error.metadata.forEach((v, k) => {
      head.set(k, v);
    });
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
