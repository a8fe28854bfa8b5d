import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import type { Route } from "../transport/protocols/rest/route-table.js";
import { commentOf } from "./comments.js";
import type { Parameter, Schema } from "./types.js";

type TextField = DescField & ({ fieldKind: "scalar" } | { fieldKind: "list"; listKind: "scalar" });

const BOOL_NOTE = "`true` or `false` in any case (R clients send `TRUE`/`FALSE`), or `1`/`0`; empty means true.";

/** Path and query parameters of a route, typed as the edge parses them (request-decoder.ts). */
export function parametersOf(route: Route): Parameter[] {
  const input = route.spec.method.input;
  const path: Parameter[] = route.template.segments.flatMap((s) => {
    if (s.kind !== "var") return [];
    const field = fieldAt(input, s.field);
    const notes = [...commented(field), ...(s.rest ? ["May contain `/`."] : []), ...(isBool(field) ? [BOOL_NOTE] : [])];
    return [{ name: s.field, in: "path", required: true, ...described(notes), schema: textSchema(field) }];
  });
  return [...path, ...textFields(route).map((f) => queryParameter(route, f))];
}

/**
 * The fields a query string (or a multipart form field) may set: the edge parses scalars and lists of
 * scalars from text, each field under its JSON name or its proto name. Bytes are not parsed from text.
 */
export function textFields(route: Route): TextField[] {
  return [...new Set(route.queryFields.values())].filter(isText);
}

/** A field's value written as text, as the edge parses it. */
export function textSchema(field: TextField): Schema {
  const scalar = scalarText(field.scalar);
  return field.fieldKind === "list" ? { type: "array", items: scalar } : scalar;
}

function queryParameter(route: Route, field: TextField): Parameter {
  const notes = commented(field);
  if (field.name !== field.jsonName) notes.push(`Also accepted as \`${field.name}\`.`);
  const header = route.headerFields.find(([, f]) => f === field)?.[0];
  // Header-sourced fields are applied first, so the query wins.
  if (header) notes.push(`Taken from the \`${header}\` request header when absent.`);
  if (isBool(field)) notes.push(BOOL_NOTE);
  const list = field.fieldKind === "list";
  if (list) notes.push("Repeat the parameter or separate the values with commas.");
  return {
    name: field.jsonName,
    in: "query",
    required: false,
    ...described(notes),
    schema: textSchema(field),
    ...(list ? { style: "form", explode: true } : {}),
  };
}

function scalarText(type: ScalarType): Schema {
  switch (type) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "string", enum: ["true", "false", "TRUE", "FALSE"] };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return { type: "integer", format: "int64" };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: "integer", format: "uint64", minimum: 0 };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", format: "uint32", minimum: 0, maximum: 4294967295 };
    default:
      return { type: "integer", format: "int32" };
  }
}

function isText(field: DescField): field is TextField {
  const scalar = field.fieldKind === "scalar" || (field.fieldKind === "list" && field.listKind === "scalar");
  return scalar && field.scalar !== ScalarType.BYTES;
}

function isBool(field: TextField): boolean {
  return field.scalar === ScalarType.BOOL;
}

/** The field a path variable (`a.b`) names; any other kind would fail every request to the route. */
function fieldAt(message: DescMessage, path: string): TextField {
  let m: DescMessage | undefined = message;
  let field: DescField | undefined;
  for (const name of path.split(".")) {
    field = m?.fields.find((f) => f.name === name);
    m = field?.message;
  }
  if (!field || !isText(field)) throw new Error(`${message.typeName}: path variable ${path} is not a text field`);
  return field;
}

/** The field's proto comment, first of a parameter's notes. */
function commented(field: DescField): string[] {
  const comment = commentOf(field);
  return comment ? [comment] : [];
}

function described(notes: readonly string[]): { description?: string } {
  return notes.length > 0 ? { description: notes.join(" ") } : {};
}
