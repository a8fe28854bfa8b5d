import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { MAX_DOCUMENT_BYTES, MAX_JSON_DEPTH, MAX_JSON_VALUES } from "./limits.js";
import type { LocalizedText, NetworkDocument, NetworkInput } from "./model.js";

function invalid(message: string): never {
  throw new ConnectError(message, Code.InvalidArgument);
}

/** Input rules of reference §2.1: localized strings sorted by lang with empty values dropped. */
export function normalizeLocalized(list: readonly LocalizedText[] | undefined): LocalizedText[] {
  return (list ?? [])
    .filter((l) => l.value.length > 0)
    .map((l) => ({ lang: l.lang, value: l.value }))
    .sort((a, b) => (a.lang < b.lang ? -1 : a.lang > b.lang ? 1 : 0));
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
    studyIds: [...(input.studyIds ?? [])],
    studySummaries: [...(input.studySummaries ?? [])],
    memberships: [...(input.memberships ?? [])],
    networkIds: [...(input.networkIds ?? [])],
    ...(input.logo ? { logo: input.logo } : {}),
  };
}

/** `content` of the wire format: absent or empty means `{}`; anything but a JSON object is refused. */
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
 * Holds `roots` (each one at level 1), the values of one document field, to the depth and count
 * limits. The walk goes at most one level below the depth limit, so no input, however deep, can
 * overflow it.
 */
function checkJson(roots: readonly JsonValue[], field: string): void {
  let values = 0;
  const visit = (value: JsonValue, level: number): void => {
    if (++values > MAX_JSON_VALUES) invalid(`${field} holds more than ${MAX_JSON_VALUES} values (objects, arrays and scalars)`);
    if (value === null || typeof value !== "object") return;
    if (level > MAX_JSON_DEPTH) invalid(`${field} nests deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`);
    for (const child of Array.isArray(value) ? value : Object.values(value)) visit(child, level + 1);
  };
  for (const root of roots) visit(root, 1);
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
  const bytes = Buffer.byteLength(json);
  if (bytes > MAX_DOCUMENT_BYTES) invalid(`the network takes ${bytes} bytes as JSON; at most ${MAX_DOCUMENT_BYTES} are accepted`);
  return json;
}
