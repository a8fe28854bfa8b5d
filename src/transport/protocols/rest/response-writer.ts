import { isMessage, toJson, type DescField, type DescMessage, type DescOneof, type Message } from "@bufbuild/protobuf";
import { isReflectMessage, reflect } from "@bufbuild/protobuf/reflect";
import { HttpBodySchema, type HttpBody } from "../../../../gen/es/google/api/httpbody_pb.js";
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
  responseHeader.forEach((value, key) => {
    headers[key] = value;
  });
  const rule = route.answer;
  const created = rule.created && createdPath(rule.created, route.spec.method.output, msg);
  if (created !== undefined) headers.location = baseUrl + created;
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
  if (field.fieldKind === "message") {
    // Through reflection: a oneof member lives under the oneof's name, not its own.
    const value = messageIn(schema, msg, field);
    if (!value) return EMPTY;
    if (isMessage(value, HttpBodySchema)) return { contentType: value.contentType || "application/octet-stream", data: value.data };
    return json(toJson(field.message, value, route.style));
  }
  return json(fieldJson(schema, msg, field, route));
}

/**
 * The field a server stream's raw bytes come from: its response body, when that is one HttpBody field
 * or a oneof with one (whose other members answer as a unary call's body: a queued command).
 */
export function rawBodyField(route: Route): DescField | undefined {
  const rb = route.responseBody;
  if (rb?.kind === "oneof") return rb.fields.find(isHttpBody);
  return rb !== undefined && isHttpBody(rb) ? rb : undefined;
}

/** The HttpBody a message holds in `field`, when it is set. */
export function httpBodyIn(schema: DescMessage, msg: Message, field: DescField): HttpBody | undefined {
  const value = messageIn(schema, msg, field);
  return isMessage(value, HttpBodySchema) ? value : undefined;
}

/** The message a message field holds, when it is set. */
function messageIn(schema: DescMessage, msg: Message, field: DescField): Message | undefined {
  const r = reflect(schema, msg);
  if (!r.isSet(field)) return undefined;
  const value = r.get(field);
  return isReflectMessage(value) ? value.message : undefined;
}

function setMember(schema: DescMessage, oneof: DescOneof, msg: Message): DescField | undefined {
  const r = reflect(schema, msg);
  return r.oneofCase(oneof);
}

/** A non-message field: a list answers `[]` even when empty; elements keep the service's JSON style. */
function fieldJson(schema: DescMessage, msg: Message, field: DescField, route: Route): unknown {
  if (field.fieldKind === "list" && field.listKind === "message") {
    const elements: unknown[] = [];
    for (const m of reflect(schema, msg).get(field)) if (isReflectMessage(m)) elements.push(toJson(field.message, m.message, route.style));
    return elements;
  }
  const all = toJson(schema, msg, { ...route.style, alwaysEmitImplicit: true }) as Record<string, unknown>;
  return all[field.jsonName];
}

function json(value: unknown): EncodedBody {
  return { contentType: "application/json", data: JSON.stringify(value) };
}

/** One line of a newline-delimited JSON stream. */
export function ndjsonLine(schema: DescMessage, msg: Message, route: Route): string {
  return `${JSON.stringify(toJson(schema, msg, route.style))}\n`;
}
