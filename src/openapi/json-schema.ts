import { ScalarType, type DescEnum, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import type { RestStyle } from "../transport/service-registry.js";
import { commentOf } from "./comments.js";
import type { Schema } from "./types.js";

const COMPONENTS = "#/components/schemas/";

/** Well-known types whose proto3 JSON is not an object of their fields; written inline. */
const WELL_KNOWN: Readonly<Record<string, Schema>> = {
  "google.protobuf.Struct": { type: "object", description: "Any JSON object." },
  "google.protobuf.Value": { description: "Any JSON value." },
  "google.protobuf.ListValue": { type: "array", description: "Any JSON array." },
  "google.protobuf.Timestamp": { type: "string", format: "date-time" },
  "google.protobuf.Duration": { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$" },
  "google.protobuf.FieldMask": { type: "string" },
  "google.protobuf.Empty": { type: "object" },
  "google.protobuf.Any": { type: "object", properties: { "@type": { type: "string" } }, required: ["@type"] },
};
/** Wrappers are written as their `value` alone. */
const WRAPPER = /^google\.protobuf\.(Double|Float|Int64|UInt64|Int32|UInt32|Bool|String|Bytes)Value$/;

/**
 * The JSON Schemas of the messages a REST answer or body holds, as protobuf-es writes and reads their
 * proto3 JSON: JSON names, 64-bit integers as strings, bytes as base64, enums by name, well-known
 * types in their own forms. A message becomes a named component (its full proto name) so recursive
 * and shared messages are written once.
 */
export class SchemaSet {
  private readonly named = new Map<string, Schema>();
  /** Whether each named message was described with its implicit fields required. */
  private readonly fullStyle = new Map<string, boolean>();

  /** A reference to `message` as a service of `style` writes it. */
  message(message: DescMessage, style: RestStyle): Schema {
    const inline = WELL_KNOWN[message.typeName];
    if (inline) return inline;
    if (WRAPPER.test(message.typeName)) return this.field(message.fields[0]!, style);
    const name = message.typeName;
    const described = this.fullStyle.get(name);
    if (described === undefined) {
      this.fullStyle.set(name, style.alwaysEmitImplicit);
      this.named.set(name, this.object(message, style));
    } else if (described !== style.alwaysEmitImplicit && message.fields.some(isImplicit)) {
      // One component per message keeps names readable; two services answering the same message
      // in different styles would need two of them.
      throw new Error(`${name} is answered both with and without its implicit fields; describe it twice`);
    }
    return { $ref: COMPONENTS + name };
  }

  /** The JSON value of one field. */
  field(field: DescField, style: RestStyle): Schema {
    switch (field.fieldKind) {
      case "scalar":
        return scalarSchema(field.scalar);
      case "enum":
        return enumSchema(field.enum);
      case "message":
        return this.message(field.message, style);
      case "list":
        return { type: "array", items: this.element(field, style) };
      case "map":
        return { type: "object", additionalProperties: this.element(field, style) };
    }
  }

  /** Every named message described so far, by name. */
  components(): Record<string, Schema> {
    return Object.fromEntries([...this.named].sort(([a], [b]) => (a < b ? -1 : 1)));
  }

  private element(field: DescField & { fieldKind: "list" | "map" }, style: RestStyle): Schema {
    if (field.message) return this.message(field.message, style);
    if (field.enum) return enumSchema(field.enum);
    return scalarSchema(field.scalar);
  }

  /**
   * A message's fields by JSON name. A service that always emits implicit fields always writes the
   * fields without explicit presence (plain scalars, lists, maps): those are required in its answers.
   */
  private object(message: DescMessage, style: RestStyle): Schema {
    // The name is taken before the fields are described: a message may contain itself.
    this.named.set(message.typeName, {});
    const properties: Record<string, Schema> = {};
    for (const f of message.fields) {
      const schema = this.field(f, style);
      const comment = commentOf(f);
      properties[f.jsonName] = comment ? { ...schema, description: comment } : schema;
    }
    const required = style.alwaysEmitImplicit ? message.fields.filter(isImplicit).map((f) => f.jsonName) : [];
    const oneofs = message.oneofs.map((o) => `at most one of ${o.fields.map((f) => `\`${f.jsonName}\``).join(", ")} is present`);
    const about = commentOf(message);
    const notes = [...(about ? [about] : []), ...(oneofs.length > 0 ? [`${capitalize(oneofs.join("; "))}.`] : [])];
    return {
      type: "object",
      ...(notes.length > 0 ? { description: notes.join("\n\n") } : {}),
      properties,
      ...(required.length > 0 ? { required } : {}),
    };
  }
}

function isImplicit(field: DescField): boolean {
  return field.presence === FeatureSet_FieldPresence.IMPLICIT;
}

/** A scalar as proto3 JSON writes it. */
function scalarSchema(type: ScalarType): Schema {
  switch (type) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    case ScalarType.DOUBLE:
      return { type: "number", format: "double" };
    case ScalarType.FLOAT:
      return { type: "number", format: "float" };
    // 64-bit integers are strings in proto3 JSON: a JSON number cannot hold them exactly.
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return { type: "string", format: "int64", pattern: "^-?[0-9]+$" };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: "string", format: "uint64", pattern: "^[0-9]+$" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", format: "uint32", minimum: 0, maximum: 4294967295 };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", format: "int32" };
  }
}

function enumSchema(e: DescEnum): Schema {
  if (e.typeName === "google.protobuf.NullValue") return { type: "null" };
  return { type: "string", enum: e.values.map((v) => v.name) };
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
