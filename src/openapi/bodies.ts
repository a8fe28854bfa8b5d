import type { DescField } from "@bufbuild/protobuf";
import { isHttpBody } from "../transport/protocols/rest/request-decoder.js";
import { rawBodyField } from "../transport/protocols/rest/response-writer.js";
import type { Route } from "../transport/protocols/rest/route-table.js";
import { FILE_PART } from "../transport/protocols/rest/upload-stream.js";
import { ERROR_REF } from "./error-responses.js";
import type { HandlerAnswers } from "./handler-answers.js";
import type { SchemaSet } from "./json-schema.js";
import { DEFAULT_RAW_MEDIA, rawContent } from "./media.js";
import { textFields, textSchema } from "./parameters.js";
import type { Content, MediaType, RequestBody, Schema } from "./types.js";

const NDJSON = "application/x-ndjson";

/**
 * The request body as the edge reads it: the whole request message or one field as JSON, an
 * HttpBody as raw bytes, or the streamed upload of a client-streaming route.
 */
export function requestBodyOf(route: Route, schemas: SchemaSet, answers: HandlerAnswers): RequestBody | undefined {
  const body = route.bodyField;
  if (!body) return undefined;
  // A streamed body of given media types (an assign's value), else a file upload.
  if (route.spec.kind === "client_streaming") {
    return { required: true, content: answers.requestMedia ? rawContent(answers.requestMedia) : uploadContent(route) };
  }
  // An empty JSON body is an empty message.
  if (body === "*") return { required: false, content: json(schemas.message(route.spec.method.input, route.style)) };
  if (isHttpBody(body)) return { required: true, content: rawContent(answers.requestMedia ?? DEFAULT_RAW_MEDIA) };
  return { required: false, content: json(schemas.field(body, route.style)) };
}

/** Multipart with the file in its part and the other parameters as form fields, or the file itself. */
function uploadContent(route: Route): Content {
  const properties: Record<string, Schema> = { [FILE_PART]: { type: "string", format: "binary" } };
  for (const f of textFields(route)) properties[f.jsonName] = textSchema(f);
  return {
    "multipart/form-data": { schema: { type: "object", properties, required: [FILE_PART] } },
    "application/octet-stream": {
      schema: { type: "string", format: "binary", description: "The file itself; the parameters in the query." },
    },
  };
}

/**
 * The body of a unary answer (response-writer.ts): the whole response message, its `response_body`
 * field, or the members of a `response_body` oneof (whichever is set); `pick` keeps those a given
 * answer can carry (the field, or the members). Undefined: no body.
 */
export function answerContent(
  route: Route,
  schemas: SchemaSet,
  answers: HandlerAnswers,
  pick: (members: readonly DescField[]) => readonly DescField[] = (members) => members,
): Content | undefined {
  const rb = route.responseBody;
  const output = route.spec.method.output;
  if (!rb) return output.fields.length > 0 ? json(schemas.message(output, route.style)) : undefined;
  const chosen = pick(rb.kind === "oneof" ? rb.fields : [rb]);
  return chosen.length === 0 ? undefined : merge(chosen.map((f) => fieldContent(route, schemas, answers, f)));
}

/**
 * A server stream: the bytes of its HttpBody `response_body` (downloads, evaluations), otherwise one response
 * message per line, and an error after the first line as a last `{"error": …}` line.
 */
export function streamContent(route: Route, schemas: SchemaSet, answers: HandlerAnswers): Content {
  const raw = rawBodyField(route);
  if (raw) return rawContent(answers.responseMedia?.[raw.name] ?? DEFAULT_RAW_MEDIA);
  const errorLine: Schema = { type: "object", properties: { error: ERROR_REF }, required: ["error"] };
  return {
    [NDJSON]: {
      schema: { description: "One JSON object per line.", anyOf: [schemas.message(route.spec.method.output, route.style), errorLine] },
    },
  };
}

function fieldContent(route: Route, schemas: SchemaSet, answers: HandlerAnswers, field: DescField): Content {
  if (isHttpBody(field)) return rawContent(answers.responseMedia?.[field.name] ?? DEFAULT_RAW_MEDIA);
  return json(schemas.field(field, route.style));
}

/** Members answering the same media type are alternatives of one schema. */
function merge(contents: readonly Content[]): Content {
  const byType = new Map<string, MediaType[]>();
  for (const content of contents)
    for (const [type, media] of Object.entries(content)) byType.set(type, [...(byType.get(type) ?? []), media]);
  return Object.fromEntries(
    [...byType].map(([type, all]) => [type, all.length === 1 ? all[0]! : { schema: { anyOf: all.map((m) => m.schema) } }]),
  );
}

function json(schema: Schema): Content {
  return { "application/json": { schema } };
}
