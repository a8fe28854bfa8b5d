import { create, fromJson, ScalarType, type DescField, type DescMessage, type JsonValue, type Message } from "@bufbuild/protobuf";
import { reflect, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import { HttpBodySchema } from "../../../../gen/es/google/api/httpbody_pb.js";
import { Fault } from "../../../errors/fault.js";
import type { Route } from "./route-table.js";

export const HTTP_BODY_TYPE = HttpBodySchema.typeName;

export function isHttpBody(field: DescField): boolean {
  return field.fieldKind === "message" && field.message.typeName === HTTP_BODY_TYPE;
}

/** Everything of an HTTP request that can feed a request message, the body aside. */
export interface RequestParts {
  readonly vars: ReadonlyMap<string, string>;
  readonly query: URLSearchParams | undefined;
  readonly header: (name: string) => string | undefined;
}

/** Builds the request message of a unary or server-streaming route. */
export function decodeRequest(route: Route, parts: RequestParts, body: Buffer | undefined, contentType: string): Message {
  const schema = route.spec.method.input;
  if (route.bodyField === "*" || (route.bodyField && !isHttpBody(route.bodyField))) requireJsonType(contentType, body);
  let msg: Message;
  if (route.bodyField === "*") {
    msg = body && body.length > 0 ? fromJsonOr400(schema, parseJson(body)) : create(schema);
  } else {
    msg = create(schema);
    if (route.bodyField && body && body.length > 0) setBodyField(reflect(schema, msg), route.bodyField, body, contentType);
  }
  applyParts(route, reflect(schema, msg), parts);
  return msg;
}

const JSON_TYPE = /^application\/json\s*(;|$)/i;

/**
 * A JSON body must say it is JSON: a cross-site HTML form posts text/plain, urlencoded or multipart
 * bodies without a CORS preflight, never application/json. An empty body without a type is no form.
 */
function requireJsonType(contentType: string, body: Buffer | undefined): void {
  if (JSON_TYPE.test(contentType) || (contentType === "" && (body === undefined || body.length === 0))) return;
  const given = contentType === "" ? "none" : `'${contentType}'`;
  throw new Fault("unsupported_media", `Content-Type must be application/json for this body (given: ${given})`);
}

/** Path variables, query parameters and header-sourced fields, in that order of precedence. */
export function applyParts(route: Route, r: ReflectMessage, parts: RequestParts): void {
  for (const [name, field] of route.headerFields) {
    const value = parts.header(name);
    if (value !== undefined) setScalar(r, field, value);
  }
  if (parts.query) {
    for (const [key, value] of parts.query) {
      const field = route.queryFields.get(key);
      if (field) setScalar(r, field, value);
    }
  }
  for (const [path, value] of parts.vars) setPath(r, path, value);
}

function setBodyField(r: ReflectMessage, field: DescField, body: Buffer, contentType: string): void {
  if (isHttpBody(field)) {
    r.set(field, reflect(HttpBodySchema, create(HttpBodySchema, { contentType, data: body })));
    return;
  }
  if (field.fieldKind !== "message") throw new Fault("internal", `body field ${field.name} must be a message`);
  r.set(field, reflect(field.message, fromJsonOr400(field.message, parseJson(body))));
}

function setPath(r: ReflectMessage, path: string, value: string): void {
  const names = path.split(".");
  let cur = r;
  for (let i = 0; i < names.length - 1; i++) {
    const f = cur.fields.find((x) => x.name === names[i]);
    if (f?.fieldKind !== "message") throw new Fault("internal", `bad path variable ${path}`);
    if (!cur.isSet(f)) cur.set(f, reflect(f.message, create(f.message)));
    cur = cur.get(f) as ReflectMessage;
  }
  const leaf = cur.fields.find((x) => x.name === names[names.length - 1]);
  if (!leaf) throw new Fault("internal", `bad path variable ${path}`);
  setScalar(cur, leaf, value);
}

/** Query strings carry every scalar as text; repeated fields accept repetition and commas. */
function setScalar(r: ReflectMessage, field: DescField, text: string): void {
  if (field.fieldKind === "list" && field.listKind === "scalar") {
    const list = r.get(field);
    for (const item of text.split(",")) if (item !== "") list.add(parseScalar(field, field.scalar, item.trim()));
    return;
  }
  if (field.fieldKind !== "scalar") {
    throw new Fault("invalid", `parameter ${field.jsonName} cannot be given in the query`);
  }
  r.set(field, parseScalar(field, field.scalar, text));
}

function parseScalar(field: DescField, type: ScalarType, text: string): string | boolean | number | bigint {
  switch (type) {
    case ScalarType.STRING:
      return text;
    case ScalarType.BOOL: {
      const t = text.toLowerCase();
      // R clients send TRUE/FALSE.
      if (t === "true" || t === "1" || t === "") return true;
      if (t === "false" || t === "0") return false;
      break;
    }
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      if (/^-?\d+$/.test(text)) return BigInt(text);
      break;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT: {
      const n = Number(text);
      if (text.trim() !== "" && Number.isFinite(n)) return n;
      break;
    }
    default:
      if (/^-?\d+$/.test(text)) {
        const n = Number(text);
        if (n >= -2147483648 && n <= 4294967295) return n;
      }
  }
  throw new Fault("invalid", `Invalid value for parameter '${field.jsonName}': '${text}'`);
}

export function parseJson(body: Buffer): JsonValue {
  try {
    return JSON.parse(body.toString("utf8")) as JsonValue;
  } catch (e) {
    throw new Fault("invalid", `Malformed JSON body: ${(e as Error).message}`);
  }
}

function fromJsonOr400<D extends DescMessage>(schema: D, json: JsonValue): Message {
  try {
    return fromJson(schema, json, { ignoreUnknownFields: true });
  } catch (e) {
    throw new Fault("invalid", `Invalid JSON body: ${(e as Error).message}`);
  }
}
