import type { JsonValue } from "@bufbuild/protobuf";
import type { LocalizedText, NetworkRecord } from "./model.js";
import { fold, words } from "./text.js";

export type IndexScalar = string | number | boolean | null;

/**
 * The search index entry of one network, derived from its document and state only, so that a
 * rebuild reproduces it exactly and a stored entry can be checked against its document.
 * `fields` maps a query path (`name.en`, `studyIds`, `model.a.b`) to its values; `words` holds the
 * folded words of names, acronyms and descriptions for `match()`.
 */
export interface IndexEntry {
  readonly id: string;
  readonly fields: Readonly<Record<string, readonly IndexScalar[]>>;
  readonly words: readonly string[];
}

function addLocalized(fields: Record<string, IndexScalar[]>, prefix: string, list: readonly LocalizedText[]): void {
  for (const { lang, value } of list) (fields[`${prefix}.${lang}`] ??= []).push(value);
}

function addModel(fields: Record<string, IndexScalar[]>, path: string, value: JsonValue): void {
  if (Array.isArray(value)) {
    for (const item of value) addModel(fields, path, item);
  } else if (value !== null && typeof value === "object") {
    for (const [key, child] of Object.entries(value)) addModel(fields, `${path}.${key}`, child);
  } else {
    (fields[path] ??= []).push(value);
  }
}

export function indexEntryOf({ document: doc, state }: NetworkRecord): IndexEntry {
  const fields: Record<string, IndexScalar[]> = {
    id: [doc.id],
    studyIds: [...doc.studyIds],
    networkIds: [...doc.networkIds],
    published: [state.publishedTag !== undefined],
    revisionStatus: [state.revisionStatus],
    revisionsAhead: [state.revisionsAhead],
    lastModifiedDate: [state.lastUpdate],
  };
  addLocalized(fields, "name", doc.name);
  addLocalized(fields, "acronym", doc.acronym);
  addLocalized(fields, "description", doc.description);
  addModel(fields, "model", doc.model);
  const text = [...doc.name, ...doc.acronym, ...doc.description].map((l) => l.value).join(" ");
  return { id: doc.id, fields, words: [...new Set(words(text))].sort() };
}

// Paths that never have children: looking them up needs no scan of the other keys.
const LEAVES = new Set(["id", "studyIds", "networkIds", "published", "revisionStatus", "revisionsAhead", "lastModifiedDate"]);
const LOCALIZED_LEAF = /^(name|acronym|description)\.[^.]+$/;

/** Whether a query path can have values below it (`model.a` can, `name.en` and `id` cannot). */
export function isLeafPath(path: string): boolean {
  return LEAVES.has(path) || LOCALIZED_LEAF.test(path);
}

/** Whether the values of entry field `field` are among those of query path `path` (see valuesAt). */
export function covers(path: string, field: string): boolean {
  return field === path || (field.startsWith(`${path}.`) && !isLeafPath(path));
}

/** Values under a query path: the path itself and everything below it (`name` covers `name.en`). */
export function valuesAt(entry: IndexEntry, path: string): readonly IndexScalar[] {
  const exact = entry.fields[path];
  if (isLeafPath(path)) return exact ?? [];
  const below = `${path}.`;
  const out: IndexScalar[] = exact ? [...exact] : [];
  for (const key in entry.fields) if (key.startsWith(below)) out.push(...entry.fields[key]!);
  return out;
}

// Entries are replaced, never changed, on each write: folding is cached per entry object.
const foldCache = new WeakMap<IndexEntry, Map<string, string[]>>();

/** Values under a path as folded text (for `like`). */
export function foldedValuesAt(entry: IndexEntry, path: string): readonly string[] {
  let perPath = foldCache.get(entry);
  if (!perPath) foldCache.set(entry, (perPath = new Map()));
  let folded = perPath.get(path);
  if (!folded) {
    folded = valuesAt(entry, path).flatMap((v) => (v === null ? [] : [fold(String(v))]));
    perPath.set(path, folded);
  }
  return folded;
}

export function foldedWords(entry: IndexEntry, path: string): string[] {
  return valuesAt(entry, path).flatMap((v) => (typeof v === "string" ? words(v) : []));
}

