/**
 * docs/api.md, the reference of every RPC and REST path, made from what the OpenAPI description is
 * built of (src/openapi/): the route table's operations (parameters, bodies, statuses, roles), the
 * protos' comments, and the messages as JSON Schemas (SchemaSet), with the gRPC method beside each
 * REST path and the RPCs that have no REST path. Written by gen-api-doc.ts, compared by check-gen.ts.
 */
import type { DescField, DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { ScalarType } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { FAULT_ANSWERS, codeStatus } from "../../src/errors/mapping.js";
import { accessRule, accessText } from "../../src/openapi/access.js";
import { commentOf } from "../../src/openapi/comments.js";
import { describedRouteTable } from "../../src/openapi/described.js";
import { buildOpenApi } from "../../src/openapi/document.js";
import { ERROR_SCHEMA, ERROR_SCHEMA_NAME } from "../../src/openapi/error-responses.js";
import { SchemaSet } from "../../src/openapi/json-schema.js";
import type { Content, Operation, Parameter, Response, Schema } from "../../src/openapi/types.js";
import { REST_CONTRACTS } from "../../src/rest-contracts.js";
import generatedComments from "../../gen/comments/proto-comments.json" with { type: "json" };

const COMMENTS: Readonly<Record<string, string | undefined>> = generatedComments;

export const API_DOC = "docs/api.md";

const HEADER = `<!-- Made from proto/ and src/openapi/ by \`npm run gen\` (test/tools/gen-api-doc.ts); \`npm run gen:check\` fails when it is stale. Edit the protos' comments, not this file. -->`;

const INTRO = `# API reference

Every RPC of the two services, with its REST path where it has one. The same handlers answer
**gRPC, gRPC-Web, Connect and REST/JSON** on one port: an RPC is called over gRPC, gRPC-Web and Connect
at \`POST /<package>.<Service>/<Method>\`, and over REST at the path its \`google.api.http\` annotation
gives. This page is made from the protos and from what builds the OpenAPI description (\`GET
/openapi.json\`, \`GET /docs\` for the interactive page), so it names every route the server serves and
nothing else. How the REST edge reads requests and writes answers, the error model, TLS:
[protocols.md](protocols.md). What the R service does behind its RPCs: [r-service.md](r-service.md);
the catalogue's: [catalogue.md](catalogue.md).

Authentication is HTTP Basic on REST and the same \`authorization\` header as gRPC metadata; each RPC
says which roles it needs, any one of them (roles and ownership: [security.md](security.md#roles)).
Public RPCs need no credentials. Over REST, fields that are not in the path or the body are query
parameters; booleans also take \`TRUE\`/\`FALSE\`, repeated fields are repeated or comma-separated.

Besides the RPCs, the port serves \`GET /openapi.json\` and \`GET /docs\` (public), \`GET /metrics\`
(Prometheus text, \`administrator\` or \`manager\`: [operations.md](operations.md#logs-and-metrics)),
\`grpc.health.v1.Health\` and gRPC reflection (\`grpc.reflection.v1\` and \`v1alpha\`, public).`;

const KIND: Readonly<Record<DescMethod["methodKind"], string>> = {
  unary: "unary",
  server_streaming: "server stream",
  client_streaming: "client stream",
  bidi_streaming: "bidirectional stream",
};

/** The whole page. */
export function apiDocument(): string {
  const table = describedRouteTable();
  const api = buildOpenApi(table);
  const operations = new Map<string, { path: string; verb: string; op: Operation }[]>();
  for (const [path, item] of Object.entries(api.paths))
    for (const [verb, op] of Object.entries(item) as [string, Operation][]) {
      const rpc = op.operationId.replace(/_\d+$/, "");
      operations.set(rpc, [...(operations.get(rpc) ?? []), { path, verb: verb.toUpperCase(), op }]);
    }
  // One set per service: each writes its messages in its own JSON style (the shared google.api.HttpBody
  // is described once, as the first service writes it).
  const messages: Record<string, Schema> = {};
  const descs = new Map<string, DescMessage>();
  const out: string[] = [HEADER, "", INTRO, "", "## Contents", ""];
  out.push("| RPC | REST | roles |", "|---|---|---|");
  for (const [service] of REST_CONTRACTS)
    for (const method of service.methods) {
      const rest = (operations.get(`${service.name}_${method.name}`) ?? []).map((o) => `\`${o.verb} ${o.path}\``).join("<br>");
      out.push(row([`[${service.name}.${method.name}](#${slug(`${service.name}.${method.name}`)})`, rest || "none", rolesText(method)]));
    }
  for (const [service, style] of REST_CONTRACTS) {
    out.push("", `## ${service.name}`, "");
    const about = COMMENTS[service.typeName];
    if (about) out.push(about, "");
    out.push(
      `gRPC service \`${service.typeName}\` (\`${protoFile(service)}\`). ${style.alwaysEmitImplicit ? "Its JSON answers hold every field, defaults included." : "Its JSON answers hold only the fields that are set."}`,
    );
    const schemas = new SchemaSet();
    for (const method of service.methods) {
      for (const m of [method.input, method.output]) {
        schemas.message(m, style);
        collect(m, descs);
      }
      out.push("", ...methodSection(method, operations.get(`${service.name}_${method.name}`) ?? []));
    }
    for (const [name, schema] of Object.entries(schemas.components())) messages[name] ??= schema;
  }
  out.push("", ...errorsSection(api.components.responses));
  out.push("", ...messagesSection(sortedMessages(messages), descs));
  return `${out.join("\n")}\n`;
}

function methodSection(method: DescMethod, ops: readonly { path: string; verb: string; op: Operation }[]): string[] {
  const service = method.parent;
  const out = [`### ${service.name}.${method.name}`, ""];
  const comment = commentOf(method);
  if (comment) out.push(comment, "");
  const rule = accessRule(method);
  out.push(
    `- gRPC, gRPC-Web, Connect: \`POST /${service.typeName}/${method.name}\` (${KIND[method.methodKind]}), ${messageLink(method.input)} → ${messageLink(method.output)}`,
    `- ${accessText(rule)}`,
    `- REST: ${ops.length === 0 ? "none" : ops.map((o) => `\`${o.verb} ${o.path}\``).join(", ")}`,
  );
  for (const { path, verb, op } of ops) {
    out.push("", `#### \`${verb} ${path}\``, "");
    // The operation's own notes: its description without what this section already says.
    const known = new Set([comment, accessText(rule), `gRPC, gRPC-Web and Connect: \`/${service.typeName}/${method.name}\`.`]);
    const notes = op.description.split("\n\n").filter((p) => !known.has(p));
    if (notes.length > 0) out.push(notes.join("\n\n"), "");
    if (op.parameters && op.parameters.length > 0) {
      out.push("| parameter | in | type | description |", "|---|---|---|---|");
      for (const p of op.parameters) out.push(parameterRow(p));
      out.push("");
    }
    if (op.requestBody) out.push(`Body${op.requestBody.required ? "" : " (may be empty)"}: ${contentText(op.requestBody.content)}`, "");
    out.push("| status | body | when |", "|---|---|---|");
    const errors: string[] = [];
    for (const [status, answer] of Object.entries(op.responses)) {
      if ("$ref" in answer) errors.push(status === "default" ? "other" : status);
      else out.push(answerRow(status, answer));
    }
    out.push(row([errors.join(", "), "[the error body](#errors)", "see [Errors](#errors)"]));
  }
  return out;
}

function parameterRow(p: Parameter): string {
  return row([`\`${p.name}\``, p.in, typeText(p.schema), p.description ?? ""]);
}

function answerRow(status: string, answer: Response): string {
  const headers = Object.entries(answer.headers ?? {}).map(([name, h]) => `header \`${name}\`: ${h.description}`);
  const body = answer.content ? contentText(answer.content) : "none";
  return row([status, [body, ...headers].join("; "), answer.description]);
}

/** A body's media types, each with its schema. */
function contentText(content: Content): string {
  return Object.entries(content)
    .map(([media, { schema }]) => `\`${media}\`${schemaNote(schema)}`)
    .join("; ");
}

function schemaNote(schema: Schema): string {
  const text = typeText(schema);
  return text ? `: ${text}` : "";
}

/** A JSON Schema of the description as a few words, messages as links to their section. */
function typeText(schema: Schema): string {
  const ref = schema.$ref;
  if (typeof ref === "string") {
    const name = ref.slice(ref.lastIndexOf("/") + 1);
    return name === ERROR_SCHEMA_NAME ? "[the error body](#errors)" : `[\`${shortName(name)}\`](#${slug(name)})`;
  }
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as Schema[]).map(typeText).join(" or ");
  const description = typeof schema.description === "string" ? schema.description : "";
  switch (schema.type) {
    case "array":
      if (!schema.items) return description ? `array (${lower(description)})` : "array";
      return `array of ${typeText(schema.items as Schema)}`;
    case "object": {
      if (schema.additionalProperties) return `object of ${typeText(schema.additionalProperties as Schema)}`;
      const props = Object.keys((schema.properties as Record<string, Schema> | undefined) ?? {});
      if (props.length > 0) return `object with ${props.map((p) => `\`${p}\``).join(", ")}`;
      return description ? `object (${lower(description)})` : "object";
    }
    case "string": {
      if (Array.isArray(schema.enum)) return `one of ${(schema.enum as string[]).map((v) => `\`${v}\``).join(", ")}`;
      if (schema.format === "binary") return description ? `bytes (${lower(description)})` : "bytes";
      const form = schema.contentEncoding ?? schema.format;
      const base = typeof form === "string" ? `string (${form})` : "string";
      return description ? `${base}: ${lower(description)}` : base;
    }
    case "integer":
    case "number":
    case "boolean":
    case "null":
      return typeof schema.format === "string" ? `${schema.type} (${schema.format})` : String(schema.type);
    default:
      return description ? lower(description) : "any JSON value";
  }
}

function errorsSection(responses: Readonly<Record<string, Response>>): string[] {
  const out = [
    "## Errors",
    "",
    `Every error answers the same body over REST, its \`message\` the text a gRPC, gRPC-Web or Connect client gets with the code (how errors travel: [protocols.md](protocols.md#errors)): ${fieldList(ERROR_SCHEMA)}.`,
    "",
    "Each kind of error has its HTTP status and its gRPC code, whatever the protocol:",
    "",
    "| kind | HTTP | gRPC |",
    "|---|---|---|",
  ];
  for (const [kind, { code, status }] of Object.entries(FAULT_ANSWERS)) out.push(row([`\`${kind}\``, String(status), codeName(code)]));
  out.push(
    "",
    "Errors that are not the handlers' (the protocols' own: an unknown method, a deadline, a message over the limit) keep their gRPC code and answer its usual HTTP status over REST.",
    "",
    "The error answers the operations above list:",
    "",
    "| answer | statuses | gRPC | when |",
    "|---|---|---|---|",
  );
  for (const [name, r] of Object.entries(responses)) {
    const statuses = statusesOf(name, r);
    const codes = [...new Set(statuses.flatMap(codesOf))];
    const headers = Object.entries(r.headers ?? {}).map(([h, v]) => ` Header \`${h}\`: ${v.description}`);
    out.push(row([name, statuses.join(", "), codes.join(", "), `${r.description}${headers.join("")}`]));
  }
  return out;
}

/** The statuses a shared error answer stands for: named in its description for the catch-all one. */
function statusesOf(name: string, response: Response): number[] {
  const fixed: Record<string, number> = {
    BadRequest: 400,
    Unauthenticated: 401,
    UnauthenticatedOrNoRole: 401,
    PermissionDenied: 403,
    NotFound: 404,
    PayloadTooLarge: 413,
    UnsupportedMediaType: 415,
    TooManyRequests: 429,
  };
  if (fixed[name] !== undefined) return [fixed[name]];
  return [...response.description.matchAll(/\b([1-5]\d\d)\b/g)].map((m) => Number(m[1]));
}

/** The gRPC codes answered with an HTTP status: the error kinds' and the codes' usual statuses. */
function codesOf(status: number): string[] {
  const kinds = Object.values(FAULT_ANSWERS)
    .filter((a) => a.status === status)
    .map((a) => a.code);
  const usual = (Object.values(Code).filter((c) => typeof c === "number") as Code[]).filter(
    (c) => c !== Code.Unknown && c !== Code.DataLoss && codeStatus(c) === status,
  );
  return [...new Set([...kinds, ...(kinds.length > 0 ? [] : usual)])].map(codeName);
}

/** The services' messages in the order of the services, each package's by name; google's last. */
function sortedMessages(messages: Record<string, Schema>): Record<string, Schema> {
  const packages = REST_CONTRACTS.map(([service]) => service.file.proto.package);
  const rank = (name: string): number => {
    const i = packages.findIndex((p) => name.startsWith(`${p}.`));
    return i < 0 ? packages.length : i;
  };
  return Object.fromEntries(Object.entries(messages).sort(([a], [b]) => rank(a) - rank(b) || (a < b ? -1 : 1)));
}

function messagesSection(schemas: Record<string, Schema>, descs: ReadonlyMap<string, DescMessage>): string[] {
  const out = [
    "## Messages",
    "",
    "The request and answer messages of the RPCs, with the messages they hold. Fields are named as in JSON (REST, Connect's JSON, `buf curl`), the proto name beside when it differs; the JSON column is proto3 JSON's form (64-bit integers as strings, bytes as base64, enums by name).",
  ];
  for (const [name, schema] of Object.entries(schemas)) {
    out.push("", `### ${name}`, "");
    if (typeof schema.description === "string") out.push(schema.description, "");
    const props = Object.entries((schema.properties as Record<string, Schema> | undefined) ?? {});
    if (props.length === 0) {
      out.push("No fields.");
      continue;
    }
    const desc = descs.get(name);
    out.push("| field | proto | JSON | description |", "|---|---|---|---|");
    for (const [json, prop] of props) {
      const field = desc?.fields.find((f) => f.jsonName === json);
      const proto = field ? protoType(field) : "";
      const shown = field && field.name !== json ? `\`${json}\` (\`${field.name}\`)` : `\`${json}\``;
      const { description, ...form } = prop;
      out.push(row([shown, proto, typeText(form), typeof description === "string" ? description : ""]));
    }
  }
  return out;
}

/** A field's type as the proto declares it. */
function protoType(field: DescField): string {
  const named = (m: DescMessage) => `\`${m.typeName.startsWith("google.") ? m.typeName : shortName(m.typeName)}\``;
  switch (field.fieldKind) {
    case "scalar":
      return `${field.proto.proto3Optional ? "optional " : ""}${ScalarType[field.scalar].toLowerCase()}`;
    case "enum":
      return `\`${shortName(field.enum.typeName)}\``;
    case "message":
      return named(field.message);
    case "list":
      return `repeated ${field.listKind === "scalar" ? ScalarType[field.scalar].toLowerCase() : field.listKind === "enum" ? `\`${shortName(field.enum.typeName)}\`` : named(field.message)}`;
    case "map":
      return `map<${ScalarType[field.mapKey].toLowerCase()}, ${field.mapKind === "scalar" ? ScalarType[field.scalar].toLowerCase() : field.mapKind === "enum" ? shortName(field.enum.typeName) : shortName(field.message.typeName)}>`;
  }
}

/** Every message `m` holds, by name. */
function collect(m: DescMessage, into: Map<string, DescMessage>): void {
  if (into.has(m.typeName)) return;
  into.set(m.typeName, m);
  for (const f of m.fields) if (f.message) collect(f.message, into);
}

function messageLink(m: DescMessage): string {
  return `[\`${shortName(m.typeName)}\`](#${slug(m.typeName)})`;
}

function rolesText(method: DescMethod): string {
  const rule = accessRule(method);
  if (rule.isPublic) return "public";
  return rule.roles.length === 0 ? "any user" : rule.roles.map((r) => `\`${r}\``).join(", ");
}

function fieldList(schema: Schema): string {
  const example = '{"status":"404","key":"not_found","args":[],"message":"…"}';
  const props = Object.entries((schema.properties as Record<string, Schema> | undefined) ?? {}).map(
    ([name, p]) => `\`${name}\`${typeof p.description === "string" ? ` (${lower(p.description).replace(/\.$/, "")})` : ""}`,
  );
  return `\`${example}\`: ${props.join(", ")}`;
}

function protoFile(service: DescService): string {
  return `proto/${service.file.name}.proto`;
}

/** `INVALID_ARGUMENT` for Code.InvalidArgument. */
function codeName(code: Code): string {
  return Code[code].replace(/(?<=[a-z])(?=[A-Z])/g, "_").toUpperCase();
}

function shortName(typeName: string): string {
  return typeName.slice(typeName.lastIndexOf(".") + 1);
}

/** A description inside a phrase: its last full stop dropped (its case kept: `R code`). */
function lower(text: string): string {
  return text.replace(/\.$/, "");
}

/** The anchor GitHub gives a heading. */
export function slug(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** A table row: cells on one line, pipes escaped. */
function row(cells: readonly string[]): string {
  return `| ${cells.map((c) => c.replace(/\n\n/g, "<br>").replace(/\n/g, " ").replace(/\|/g, "\\|")).join(" | ")} |`;
}
