import { Fault } from "../errors/fault.js";
import { MAX_DOCUMENT_BYTES, MAX_JSON_DEPTH, MAX_JSON_VALUES } from "./limits.js";
import type { JsonObject, JsonValue, LocalizedText, NetworkDocument, NetworkInput } from "./model.js";

function invalid(message: string): never {
  throw new Fault("invalid", message);
}

// One frozen list stands for every empty one: documents are never changed in place, and the mirror
// keeps each document as long as its network lives, so an empty list of its own is memory to copy
// at every collection.
const EMPTY: readonly never[] = Object.freeze([]);

function copied<T>(list: readonly T[] | undefined): readonly T[] {
  return list === undefined || list.length === 0 ? EMPTY : list.slice();
}

/** Input rules of reference §2.1: localized strings sorted by lang with empty values dropped. */
export function normalizeLocalized(list: readonly LocalizedText[] | undefined): readonly LocalizedText[] {
  if (list === undefined || list.length === 0) return EMPTY;
  // map and filter make arrays of exactly their length (the document keeps them); most lists have
  // no empty value and are sorted already, which costs one pass to tell.
  const kept = list.every((l) => l.value.length > 0) ? list : list.filter((l) => l.value.length > 0);
  const out = kept.map((l) => ({ lang: l.lang, value: l.value }));
  for (let i = 1; i < out.length; i++) {
    // A stable sort, as Array.prototype.sort is: equal langs keep their order.
    if (out[i - 1]!.lang > out[i]!.lang) return out.sort((a, b) => (a.lang < b.lang ? -1 : a.lang > b.lang ? 1 : 0));
  }
  return out;
}

/** The stored form of a submitted document; `name` is the one required field. */
export function normalizeDocument(input: NetworkInput, id: string): NetworkDocument {
  const name = normalizeLocalized(input.name);
  if (name.length === 0) invalid("name is required");
  return {
    id,
    name,
    acronym: normalizeLocalized(input.acronym),
    description: normalizeLocalized(input.description),
    model: input.model ?? {},
    studyIds: copied(input.studyIds),
    studySummaries: copied(input.studySummaries),
    memberships: copied(input.memberships),
    networkIds: copied(input.networkIds),
    ...(input.logo ? { logo: input.logo } : {}),
  };
}

/** `content` as clients send it: absent or empty means `{}`; anything but a JSON object is refused. */
export function parseContent(content: string | undefined): JsonObject {
  if (content === undefined || content.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch (e) {
    invalid(`content is not valid JSON: ${(e as Error).message}`);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) invalid("content must be a JSON object");
  return parsed as JsonObject;
}

/**
 * Counts the values of `value` (at `level`) and below into `count.values`, failing past the depth and
 * count limits. The walk goes at most one level below the depth limit, so no input, however deep,
 * can overflow it. A plain recursive function, not a closure: tsx would name a closure on each call.
 */
function visitJson(value: JsonValue, level: number, field: string, count: { values: number }): void {
  if (++count.values > MAX_JSON_VALUES) invalid(`${field} holds more than ${MAX_JSON_VALUES} values (objects, arrays and scalars)`);
  if (value === null || typeof value !== "object") return;
  if (level > MAX_JSON_DEPTH) invalid(`${field} nests deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`);
  if (Array.isArray(value)) {
    for (const child of value) visitJson(child, level + 1, field, count);
  } else {
    for (const key in value) if (Object.hasOwn(value, key)) visitJson(value[key]!, level + 1, field, count);
  }
}

/** Holds `roots` (each one at level 1), the values of one document field, to the depth and count limits. */
function checkJson(roots: readonly JsonValue[], field: string): void {
  const count = { values: 0 };
  for (const root of roots) visitJson(root, 1, field, count);
}

/**
 * The JSON text a document is stored as, once it is known that every reader can read it back. The
 * index, the protobuf encoders and the clients' decoders all recurse into a document and hold it
 * whole, so depth and size are refused here, at write, rather than found out at every read.
 */
export function storedJson(document: NetworkDocument): string {
  checkJson([document.model], "content");
  checkJson(document.studySummaries, "studySummaries");
  checkJson(document.memberships, "memberships");
  const json = JSON.stringify(document);
  // A UTF-16 code unit takes at most 3 bytes in UTF-8: shorter texts need no count.
  if (json.length * 3 <= MAX_DOCUMENT_BYTES) return json;
  const bytes = Buffer.byteLength(json);
  if (bytes > MAX_DOCUMENT_BYTES) invalid(`the network takes ${bytes} bytes as JSON; at most ${MAX_DOCUMENT_BYTES} are accepted`);
  return json;
}
