import type { LocalizedText } from "./model.js";
import { fold } from "./search/text.js";

/**
 * Id derivation of reference §2.2: from the acronym (or, without one, an acronym made of the name's
 * capitals), one part per language in lang order, joined with "-".
 */

const UPPER = /\p{Lu}/u;

function acronymOf(name: string): string {
  const capitals = [...name].filter((c) => UPPER.test(c)).join("");
  if (capitals.length > 0) return capitals;
  // An all lower-case name has no capitals: its word initials stand in.
  return name
    .split(/\s+/)
    .filter((w) => w.length > 0)
    .map((w) => [...w][0]!.toUpperCase())
    .join("");
}

export function acronymFromName(name: readonly LocalizedText[]): LocalizedText[] {
  return name.map((n) => ({ lang: n.lang, value: acronymOf(n.value) })).filter((a) => a.value.length > 0);
}

function idPart(value: string): string {
  return fold(value.trim())
    .replace(/\s+/g, "-")
    .replace(/[^a-z0-9_.~-]/g, "_");
}

// A derived id is cut so that a `-N` suffix still leaves it a valid id (at most 200 characters).
const MAX_BASE_ID_CHARS = 190;

/**
 * The id a network gets before collisions are considered, or "" when none can be derived; acronym
 * entries are expected sorted by lang.
 */
export function baseId(acronym: readonly LocalizedText[]): string {
  const base = acronym
    .map((a) => idPart(a.value))
    .filter((p) => p.length > 0)
    .join("-")
    .slice(0, MAX_BASE_ID_CHARS);
  return isValidId(base) ? base : "";
}

/** `base` itself when free, else the first free `base-1`, `base-2`, …. */
export function firstFreeId(base: string, taken: (id: string) => boolean): string {
  if (!taken(base)) return base;
  for (let i = 1; ; i++) {
    const candidate = `${base}-${i}`;
    if (!taken(candidate)) return candidate;
  }
}

// Ids become LevelDB key parts and URL path segments: no control characters, no "/", and not "." or
// "..", which URLs resolve away before the path reaches the server.
const VALID_ID = /^[^\p{Cc}/]{1,200}$/u;

export function isValidId(id: string): boolean {
  return VALID_ID.test(id) && id !== "." && id !== "..";
}
