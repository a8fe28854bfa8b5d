import { ProtocolError, encodeFrame } from "./frames.js";
import { FIELDS, type AnyLetter, type FieldKind, type FieldName, type FrameSpec } from "./protocol-table.js";

type ValueOf<K extends FieldKind> = K extends "text"
  ? string
  : K extends "int"
    ? number
    : K extends "flag"
      ? boolean
      : K extends "bytes"
        ? Buffer
        : K extends readonly (infer Word)[]
          ? Word
          : never;

export type FieldValue<N extends FieldName> = ValueOf<(typeof FIELDS)[N]>;

/** The values of a frame's fields, by name. */
export type FieldsOf<S extends FrameSpec> = { readonly [N in S["fields"][number]]: FieldValue<N> };

/** Fields Node reads: R writes text, decimal numbers, one of a few words and JSON. */
type Readable = { [N in FieldName]: (typeof FIELDS)[N] extends "flag" ? never : N }[FieldName];

type Spec = FrameSpec & { readonly letter: AnyLetter };

/** A frame of `spec` (see protocol-table.ts for the encoding): its fields, then its body when it has one. */
export function frameOf<S extends Spec>(
  spec: S,
  values: FieldsOf<S>,
  ...body: S extends { readonly body: string } ? [Uint8Array] : []
): Buffer;
export function frameOf(
  spec: Spec,
  values: Readonly<Partial<Record<FieldName, string | number | boolean | Uint8Array>>>,
  ...body: Uint8Array[]
): Buffer {
  const parts: Uint8Array[] = [];
  for (const name of spec.fields) {
    const value = values[name];
    // The typed signature names every field; R would read the next field in a missing one's place.
    if (value === undefined) throw new Error(`The field ${name} is missing`);
    const bytes =
      typeof value === "string"
        ? Buffer.from(value, "utf8")
        : typeof value === "number"
          ? Buffer.from(decimal(name, value))
          : typeof value === "boolean"
            ? Buffer.from(String(value))
            : value;
    if (bytes.includes(0)) throw new Error(`The field ${name} cannot hold NUL`);
    parts.push(bytes, NUL);
  }
  return encodeFrame(spec.letter, ...parts, ...body);
}

const NUL = new Uint8Array(1);

function decimal(name: FieldName, value: number): string {
  if (!Number.isSafeInteger(value)) throw new Error(`The field ${name} is a whole number, not ${value}`);
  return String(value);
}

/**
 * The fields of a payload R wrote for a frame of `spec`, which has no body. Its last field ends with the
 * payload: R strings cannot hold NUL, so only the NUL that ends it is looked for, not one inside it (a
 * JSON value of megabytes is not scanned).
 */
export function decodeFields<S extends Spec & { readonly fields: readonly Readable[]; readonly body?: never }>(
  spec: S,
  payload: Buffer,
): FieldsOf<S>;
export function decodeFields(
  spec: { readonly letter: AnyLetter; readonly fields: readonly Readable[] },
  payload: Buffer,
): Partial<Record<Readable, string | number | Buffer>> {
  const values: Partial<Record<Readable, string | number | Buffer>> = {};
  let start = 0;
  spec.fields.forEach((name, i) => {
    const end = i === spec.fields.length - 1 ? payload.length - 1 : payload.indexOf(0, start);
    if (end < start || payload[end] !== 0) throw new ProtocolError(`frame ${spec.letter}: no field ${name}`);
    values[name] = fieldValue(name, payload.subarray(start, end));
    start = end + 1;
  });
  if (start !== payload.length) throw new ProtocolError(`frame ${spec.letter}: bytes after its fields`);
  return values;
}

function fieldValue(name: Readable, bytes: Buffer): string | number | Buffer {
  const kind = FIELDS[name];
  if (kind === "bytes") return bytes;
  const text = bytes.toString("utf8");
  if (kind === "text") return text;
  if (kind === "int") {
    if (!/^\d+$/.test(text)) throw new ProtocolError(`the field ${name} is not a whole number: ${JSON.stringify(text)}`);
    return Number(text);
  }
  const words: readonly string[] = kind;
  if (!words.includes(text)) throw new ProtocolError(`the field ${name} is not one of ${words.join(", ")}: ${JSON.stringify(text)}`);
  return text;
}

/** The one field of a payload, as a view: an answer's JSON, read with no copy and no scan. */
export function onlyField(payload: Buffer): Buffer | undefined {
  return payload[payload.length - 1] === 0 ? payload.subarray(0, -1) : undefined;
}
