import type { JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { LocalizedText, NetworkDocument, NetworkInput } from "./model.js";

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
  if (name.length === 0) throw new ConnectError("name is required", Code.InvalidArgument);
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
    throw new ConnectError(`content is not valid JSON: ${(e as Error).message}`, Code.InvalidArgument);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new ConnectError("content must be a JSON object", Code.InvalidArgument);
  }
  return parsed as JsonObject;
}
