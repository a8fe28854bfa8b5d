import { AUTH_REALM } from "../auth/basic.js";
import { isHttpBody } from "../transport/protocols/rest/request-decoder.js";
import type { Route } from "../transport/protocols/rest/route-table.js";
import type { AccessRule } from "./access.js";
import type { HandlerAnswers } from "./handler-answers.js";
import type { Reference, Response, Schema } from "./types.js";

export const ERROR_SCHEMA_NAME = "Error";
export const ERROR_REF: Schema = { $ref: `#/components/schemas/${ERROR_SCHEMA_NAME}` };

/** The body of every REST error (src/transport/protocols/rest/errors.ts), which R clients read `message` from. */
export const ERROR_SCHEMA: Schema = {
  type: "object",
  properties: {
    status: { type: "string", description: "The HTTP status, as text.", examples: ["404"] },
    key: { type: "string", description: "The error code as the Connect protocol spells it.", examples: ["not_found"] },
    args: { type: "array", items: {} },
    message: { type: "string" },
  },
  required: ["status", "key", "args", "message"],
};

const errorBody = { "application/json": { schema: ERROR_REF } };
const challenge = { "WWW-Authenticate": { description: `\`Basic realm="${AUTH_REALM}"\``, schema: { type: "string" } } };
const retryAfter = { "Retry-After": { description: "Seconds to wait before trying again.", schema: { type: "integer" } } };

/** Shared error answers, referenced by the operations they apply to. */
export const ERROR_RESPONSES: Readonly<Record<string, Response>> = {
  BadRequest: {
    description: "A parameter or body the edge cannot read (malformed JSON, a number that is not one), or an argument the handler refuses.",
    content: errorBody,
  },
  Unauthenticated: {
    description: "No credentials, wrong ones, or a malformed `Authorization` header.",
    headers: challenge,
    content: errorBody,
  },
  UnauthenticatedOrNoRole: {
    description:
      "No credentials, wrong ones, a malformed `Authorization` header, or none of the roles the operation needs: its contract answers 401 where others answer 403.",
    headers: challenge,
    content: errorBody,
  },
  PermissionDenied: { description: "None of the roles the operation needs, or not the owner of what it names.", content: errorBody },
  NotFound: { description: "What the path names does not exist.", content: errorBody },
  PayloadTooLarge: { description: "The body exceeds `limits.maxBodyBytes` (uploads: `limits.maxUploadBytes`).", content: errorBody },
  UnsupportedMediaType: { description: "A JSON body must be sent as `application/json`.", content: errorBody },
  TooManyRequests: {
    description: "Too many failed logins from this address, too many password checks waiting, or a resource limit (R sessions).",
    headers: retryAfter,
    content: errorBody,
  },
  Error: {
    description:
      "Any other error: 409 conflict, 500 internal, 501 not implemented, 503 unavailable (with `Retry-After`), 504 deadline exceeded.",
    headers: retryAfter,
    content: errorBody,
  },
};

type ErrorName = keyof typeof ERROR_RESPONSES;

/** The error answers a route can give, by status, in the order of their statuses. */
export function errorResponses(route: Route, access: AccessRule, answers: HandlerAnswers): Record<string, Response | Reference> {
  const hasVars = route.template.segments.some((s) => s.kind === "var");
  const body = route.bodyField;
  const out: Record<string, Response | Reference> = {};
  const add = (status: string, name: ErrorName) => (out[status] = { $ref: `#/components/responses/${name}` });
  if (hasVars || route.queryFields.size > 0 || body) add("400", "BadRequest");
  if (!access.isPublic) {
    if (access.refuseUnauthenticated) add("401", "UnauthenticatedOrNoRole");
    else {
      add("401", "Unauthenticated");
      add("403", "PermissionDenied");
    }
    add("429", "TooManyRequests");
  }
  if (hasVars) add("404", "NotFound");
  if (body) add("413", "PayloadTooLarge");
  if (body === "*" || (body && !isHttpBody(body))) add("415", "UnsupportedMediaType");
  for (const [status, e] of Object.entries(answers.errors ?? {}))
    out[status] = { description: e.description, content: { "application/json": { schema: e.schema } } };
  const sorted = Object.fromEntries(Object.entries(out).sort(([a], [b]) => Number(a) - Number(b)));
  return { ...sorted, default: { $ref: "#/components/responses/Error" } };
}
