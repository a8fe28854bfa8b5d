import { toJson, type DescField, type DescMessage, type DescOneof, type Message } from "@bufbuild/protobuf";
import { reflect, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import type { HttpBody } from "../../../../gen/es/google/api/httpbody_pb.js";
import { isHttpBody } from "./request-decoder.js";
import { createdPath } from "./rest-answer.js";
import type { Route } from "./route-table.js";

export interface EncodedBody {
  readonly contentType: string | undefined;
  readonly data: string | Uint8Array;
}

const EMPTY: EncodedBody = { contentType: undefined, data: "" };

/**
 * The status, headers and body of a unary answer, as the route's `rest_answer` option says: 201 with
 * a Location when the message holds what the call created, else its status, or its empty status when
 * there is no body.
 */
export function encodeUnary(route: Route, msg: Message, responseHeader: Headers, baseUrl: string) {
  const headers: Record<string, string> = {};
  responseHeader.forEach((value, key) => (headers[key] = value));
  const rule = route.answer;
  const created = rule.created && createdPath(rule.created, route.spec.method.output, msg);
  if (created !== undefined) headers["location"] = baseUrl + created;
  let status = created !== undefined ? 201 : rule.status;
  const body = status === 204 ? EMPTY : encodeBody(route, msg);
  if (body.contentType) headers["content-type"] = body.contentType;
  else if (rule.emptyStatus !== undefined) status = rule.emptyStatus;
  return { status, headers, body };
}

/**
 * The answer's body per `response_body`: the whole message, one field, or the set member of a oneof;
 * an HttpBody stays raw bytes; an unset message field or an empty message is an empty body (R clients
 * read a body without Content-Type as NULL).
 */
export function encodeBody(route: Route, msg: Message): EncodedBody {
  const schema = route.spec.method.output;
  const rb = route.responseBody;
  if (!rb) return schema.fields.length === 0 ? EMPTY : json(toJson(schema, msg, route.style));
  const field = rb.kind === "oneof" ? setMember(schema, rb, msg) : rb;
  if (!field) return EMPTY;
  const r = reflect(schema, msg);
  if (field.fieldKind === "message") {
    if (!r.isSet(field)) return EMPTY;
    // Through reflection: a oneof member lives under the oneof's name, not its own.
    const value = (r.get(field) as ReflectMessage).message;
    if (isHttpBody(field)) {
      const hb = value as HttpBody;
      return { contentType: hb.contentType || "application/octet-stream", data: hb.data };
    }
    return json(toJson(field.message, value, route.style));
  }
  return json(fieldJson(schema, msg, field, route));
}

function setMember(schema: DescMessage, oneof: DescOneof, msg: Message): DescField | undefined {
  const r = reflect(schema, msg);
  return r.oneofCase(oneof);
}

/** A non-message field: a list answers `[]` even when empty; elements keep the service's JSON style. */
function fieldJson(schema: DescMessage, msg: Message, field: DescField, route: Route): unknown {
  const value = (msg as unknown as Record<string, unknown>)[field.localName];
  if (field.fieldKind === "list" && field.listKind === "message") {
    return (value as Message[]).map((m) => toJson(field.message, m, route.style));
  }
  const all = toJson(schema, msg, { ...route.style, alwaysEmitImplicit: true }) as Record<string, unknown>;
  return all[field.jsonName];
}

function json(value: unknown): EncodedBody {
  return { contentType: "application/json", data: JSON.stringify(value) };
}

/** One line of a newline-delimited JSON stream. */
export function ndjsonLine(schema: DescMessage, msg: Message, route: Route): string {
  return JSON.stringify(toJson(schema, msg, route.style)) + "\n";
}
