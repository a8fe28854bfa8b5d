import type { IncomingHttpHeaders } from "node:http";
import type { Readable } from "node:stream";
import busboy from "busboy";
import { create, type Message } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import { HttpBodySchema } from "../../../../gen/es/google/api/httpbody_pb.js";
import { Channel } from "../../../channel.js";
import { Fault } from "../../../errors/fault.js";
import { applyParts, type RequestParts } from "./request-decoder.js";
import type { Route } from "./route-table.js";

const HIGH_WATER = 16;
/** The multipart part that carries the file (what rockr and browsers send). */
export const FILE_PART = "file";
const FILE_NAME_FIELD = "file_name";

/**
 * A REST upload as the stream of request messages of a client-streaming RPC: the first message carries
 * the path and query parameters, form fields and the part's file name come as they arrive, then one
 * message per chunk in the HttpBody field. Multipart bodies go through busboy; any other body is the
 * file itself. Nothing is buffered beyond a few chunks.
 */
export function uploadMessages(
  route: Route,
  req: Readable & { headers: IncomingHttpHeaders },
  parts: RequestParts,
  maxBytes: number,
): AsyncIterable<Message> {
  const schema = route.spec.method.input;
  const bodyField = route.bodyField;
  if (!bodyField || bodyField === "*") throw new Fault("internal", "upload route needs an HttpBody body field");
  const queue = new Channel<Message>({ capacity: HIGH_WATER, overflow: "pause", onDrain: () => active?.resume() });
  let active: Readable | undefined = req;

  const first = create(schema);
  applyParts(route, reflect(schema, first), parts);
  queue.push(first);

  const chunkMessage = (data: Uint8Array): Message => {
    const m = create(schema);
    reflect(schema, m).set(bodyField, reflect(HttpBodySchema, create(HttpBodySchema, { data })));
    return m;
  };
  const fieldMessage = (name: string, value: string): Message | undefined => {
    const field = route.queryFields.get(name);
    if (!field) return undefined;
    const m = create(schema);
    applyParts(route, reflect(schema, m), { vars: new Map(), query: new URLSearchParams([[name, value]]), header: () => undefined });
    return m;
  };
  const tooLarge = () => new Fault("too_large", `Upload exceeds the limit of ${maxBytes} bytes`);
  // Once the upload failed (or the handler gave up) the rest of the body is read and dropped, not
  // left unread: the client then gets the answer instead of a reset connection.
  const pipeChunks = (stream: Readable, done: () => void, onError: (e: Error) => Fault) => {
    active = stream;
    let total = 0;
    stream.on("data", (chunk: Buffer) => {
      if (queue.closed) return;
      total += chunk.length;
      if (total > maxBytes) {
        queue.fail(tooLarge());
        return;
      }
      if (!queue.push(chunkMessage(chunk)) && !queue.closed) stream.pause();
    });
    stream.once("end", done);
    stream.once("error", (e) => queue.fail(onError(e)));
  };
  // The request's own stream fails only when the client left before sending all of it; a pipe() does
  // not pass that on, so the close is watched too, or the upload would wait for ever.
  const clientLeft = () => new Fault("canceled", "client went away before sending the whole body");
  req.once("close", () => {
    if (!req.readableEnded) queue.fail(clientLeft());
  });
  // Busboy fails the file part's stream too when the body ends before the closing boundary.
  const malformed = (e: Error) => new Fault("invalid", `Malformed multipart body: ${e.message}`);

  const contentType = req.headers["content-type"] ?? "";
  if (!/^multipart\/form-data/i.test(contentType)) {
    pipeChunks(req, () => queue.close(), clientLeft);
    return queue;
  }

  let bb: busboy.Busboy;
  try {
    bb = busboy({ headers: req.headers, limits: { files: 1, fileSize: maxBytes } });
  } catch (e) {
    throw malformed(e as Error);
  }
  let sawFile = false;
  bb.on("field", (name, value) => {
    const m = fieldMessage(name, value);
    if (m) queue.push(m);
  });
  bb.on("file", (name, stream, info) => {
    if (name !== FILE_PART || sawFile) {
      stream.resume();
      return;
    }
    sawFile = true;
    const m = info.filename ? fieldMessage(FILE_NAME_FIELD, info.filename) : undefined;
    if (m) queue.push(m);
    stream.once("limit", () => queue.fail(tooLarge()));
    pipeChunks(stream, () => (active = req), malformed);
  });
  bb.once("close", () => (sawFile ? queue.close() : queue.fail(new Fault("invalid", `Missing multipart part '${FILE_PART}'`))));
  bb.once("error", (e) => queue.fail(malformed(e as Error)));
  req.pipe(bb);
  return queue;
}
