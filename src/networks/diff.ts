import type { JsonObject, JsonValue, NetworkDocument } from "./model.js";

/**
 * Differences between two revisions: `{"<field>": [left, right]}` for each changed top-level field,
 * fields named as clients see them (the model is `content`'s parsed form, under `model`).
 */
export function diffDocuments(left: NetworkDocument, right: NetworkDocument): JsonObject {
  const a = asJson(left);
  const b = asJson(right);
  const out: JsonObject = {};
  for (const field of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const l = a[field] ?? null;
    const r = b[field] ?? null;
    if (JSON.stringify(l) !== JSON.stringify(r)) out[field] = [l, r];
  }
  return out;
}

function asJson(doc: NetworkDocument): Record<string, JsonValue> {
  // Stored documents are plain JSON (they come from LevelDB's json encoding).
  return JSON.parse(JSON.stringify(doc)) as Record<string, JsonValue>;
}
