import type { DescField } from "@bufbuild/protobuf";
import type { Route } from "../transport/protocols/rest/route-table.js";
import { FILE_PART } from "../transport/protocols/rest/upload-stream.js";
import { accessRule, accessText, securityOf } from "./access.js";
import { rawBodyField } from "../transport/protocols/rest/response-writer.js";
import { answerContent, requestBodyOf, streamContent } from "./bodies.js";
import { commentOf } from "./comments.js";
import { errorResponses } from "./error-responses.js";
import { handlerAnswers, type HandlerAnswers, type SuccessStatus } from "./handler-answers.js";
import type { SchemaSet } from "./json-schema.js";
import { parametersOf } from "./parameters.js";
import type { Operation, Response } from "./types.js";

const STATUS_TEXT: Readonly<Record<SuccessStatus, string>> = { 200: "OK.", 201: "Created.", 204: "No content." };
const LOCATION = { Location: { description: "The URL of what was created.", schema: { type: "string", format: "uri" } } };

/** One route of the table as an OpenAPI operation. */
export function describeRoute(route: Route, schemas: SchemaSet, operationId: string): Operation {
  const method = route.spec.method;
  const answers = handlerAnswers(method);
  const rule = accessRule(method);
  const parameters = parametersOf(route);
  const requestBody = requestBodyOf(route, schemas, answers);
  const comment = commentOf(method);
  const notes = [
    ...(comment ? [comment] : []),
    accessText(rule),
    ...kindNote(route, answers),
    ...negotiationNote(route),
    `gRPC, gRPC-Web and Connect: \`/${method.parent.typeName}/${method.name}\`.`,
  ];
  return {
    operationId,
    tags: [method.parent.name],
    summary: words(method.name),
    description: notes.join("\n\n"),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(requestBody ? { requestBody } : {}),
    responses: { ...successResponses(route, schemas, answers), ...errorResponses(route, rule, answers) },
    security: securityOf(rule),
  };
}

/**
 * The answers the route's `rest_answer` option gives (response-writer.ts). A created resource is told
 * by the response fields its template reads: the 201 carries the members holding them, the route's
 * other status the rest. A stream's status goes out with its first message: always 200 (src/transport/protocols/rest/rest.ts).
 */
function successResponses(route: Route, schemas: SchemaSet, answers: HandlerAnswers): Record<string, Response> {
  const { status, emptyStatus, created } = route.answer;
  if (route.spec.kind === "server_streaming") {
    const streamed = { "200": { description: answers.when?.[200] ?? STATUS_TEXT[200], content: streamContent(route, schemas, answers) } };
    // The oneof's other member (an async call's command) is answered as a unary call's: 201.
    if (!created) return streamed;
    return {
      ...streamed,
      "201": successResponse(route, schemas, answers, 201, (members) => members.filter((f) => created.fields.includes(f))),
    };
  }
  const responses: Record<string, Response> = {};
  const describe = (s: SuccessStatus, pick?: (members: readonly DescField[]) => readonly DescField[]): void => {
    responses[String(s)] = successResponse(route, schemas, answers, s, pick);
  };
  if (created) {
    const holds = (f: DescField): boolean => created.fields.includes(f);
    describe(201, (members) => (members.some(holds) ? members.filter(holds) : members));
    if (answers.when?.[status] !== undefined) describe(status, (members) => members.filter((f) => !holds(f)));
  } else describe(status);
  if (emptyStatus !== undefined) describe(emptyStatus, () => []);
  return responses;
}

function successResponse(
  route: Route,
  schemas: SchemaSet,
  answers: HandlerAnswers,
  status: SuccessStatus,
  pick?: (members: readonly DescField[]) => readonly DescField[],
): Response {
  const description = answers.when?.[status] ?? STATUS_TEXT[status];
  if (status === 204) return { description };
  const headers = { ...(status === 201 ? LOCATION : {}), ...answers.headers };
  const content = answerContent(route, schemas, answers, pick);
  return { description, ...(Object.keys(headers).length > 0 ? { headers } : {}), ...(content ? { content } : {}) };
}

function kindNote(route: Route, answers: HandlerAnswers): string[] {
  switch (route.spec.kind) {
    case "server_streaming":
      return rawBodyField(route)
        ? ["Streams the bytes as they are read."]
        : ["Streams newline-delimited JSON while the call runs, one message per line; leaving cancels the call."];
    case "client_streaming":
      if (answers.requestMedia) return ["Streams the body as it arrives: it is never held whole."];
      return [
        `Streams the body: multipart/form-data with the file in the part \`${FILE_PART}\` and the parameters as form fields or in the query, or the file itself.`,
      ];
    default:
      return [];
  }
}

/** An RPC reading the Accept header negotiates: the media types of its answer are the choices. */
function negotiationNote(route: Route): string[] {
  const accept = route.headerFields.find(([header]) => header === "accept")?.[1];
  if (!accept) return [];
  const asParameter = [...route.queryFields.values()].includes(accept) ? ` (or the \`${accept.jsonName}\` parameter)` : "";
  return [`The \`Accept\` header${asParameter} chooses among the media types of the answer.`];
}

/** `GetPackageSettings` → `Get package settings`. */
function words(name: string): string {
  return name.replace(/(?<=[a-z0-9])(?=[A-Z])/g, " ").replace(/ [A-Z](?=[a-z])/g, (w) => w.toLowerCase());
}
