import type { JsonValue, LocalizedText, NetworkDocument, NetworkRecord, RevisionStatus } from "../model.js";
import { fold, sortedWords, words } from "./text.js";

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

/**
 * Appends `value` to the values of `path`. A first value makes a list of exactly one: a list that
 * starts empty and grows by push reserves room for 17, and the mirror keeps every entry's lists.
 */
function addValue(fields: Record<string, IndexScalar[]>, path: string, value: IndexScalar): void {
  const list = fields[path];
  if (list) list.push(value);
  else fields[path] = [value];
}

/** Adds the values of `list` under `prefix.lang` and returns the text of `list` appended to `text`. */
function addLocalized(fields: Record<string, IndexScalar[]>, prefix: string, list: readonly LocalizedText[], text: string): string {
  for (const { lang, value } of list) {
    addValue(fields, `${prefix}.${lang}`, value);
    text = text === "" ? value : `${text} ${value}`;
  }
  return text;
}

function addModel(fields: Record<string, IndexScalar[]>, path: string, value: JsonValue): void {
  if (Array.isArray(value)) {
    for (const item of value) addModel(fields, path, item);
  } else if (value !== null && typeof value === "object") {
    for (const key in value) if (Object.hasOwn(value, key)) addModel(fields, `${path}.${key}`, value[key]!);
  } else {
    addValue(fields, path, value);
  }
}

// The one-value lists of state fields are shared between entries (which are never changed in place):
// every network has them, and the mirror keeps every entry.
const PUBLISHED: readonly (readonly IndexScalar[])[] = [Object.freeze([false]), Object.freeze([true])];
const STATUSES: Readonly<Record<RevisionStatus, readonly IndexScalar[]>> = {
  DRAFT: Object.freeze(["DRAFT"]),
  UNDER_REVIEW: Object.freeze(["UNDER_REVIEW"]),
  DELETED: Object.freeze(["DELETED"]),
};
const SMALL_COUNTS: readonly (readonly IndexScalar[])[] = Array.from({ length: 64 }, (_, n) => Object.freeze([n]));

function published(value: boolean): IndexScalar[] {
  return PUBLISHED[value ? 1 : 0] as IndexScalar[];
}

function status(value: RevisionStatus): IndexScalar[] {
  return STATUSES[value] as IndexScalar[];
}

function count(value: number): IndexScalar[] {
  return (SMALL_COUNTS[value] ?? [value]) as IndexScalar[];
}

function sameOne(list: readonly IndexScalar[] | undefined, value: IndexScalar): boolean {
  return list !== undefined && list.length === 1 && list[0] === value;
}

function sameLocalized(a: readonly LocalizedText[], b: readonly LocalizedText[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]!.lang !== b[i]!.lang || a[i]!.value !== b[i]!.value) return false;
  return true;
}

/** Whether two documents have the same names, acronyms and descriptions: then they have the same words. */
function sameTexts(a: NetworkDocument, b: NetworkDocument): boolean {
  return sameLocalized(a.name, b.name) && sameLocalized(a.acronym, b.acronym) && sameLocalized(a.description, b.description);
}

/**
 * `previous`, the entry of an earlier record of the same network, is only a shortcut: when the
 * document is the very same object (status and publication changes), its document-derived fields
 * and words are reused as they are, and so is every state field whose value did not change; when
 * only the texts are the same (a new model, new studies), its words are. The result equals (deeply,
 * keys in the same order) what the entry computed afresh would be.
 */
export function indexEntryOf(
  { document: doc, state }: NetworkRecord,
  previous?: { readonly record: NetworkRecord; readonly entry: IndexEntry },
): IndexEntry {
  const isPublished = state.publishedTag !== undefined;
  if (previous && previous.record.document === doc && previous.entry.id === doc.id) {
    const old = previous.entry.fields;
    const fields: Record<string, readonly IndexScalar[]> = { ...old };
    if (!sameOne(old.published, isPublished)) fields.published = published(isPublished);
    if (!sameOne(old.revisionStatus, state.revisionStatus)) fields.revisionStatus = status(state.revisionStatus);
    if (!sameOne(old.revisionsAhead, state.revisionsAhead)) fields.revisionsAhead = count(state.revisionsAhead);
    if (!sameOne(old.lastModifiedDate, state.lastUpdate)) fields.lastModifiedDate = [state.lastUpdate];
    return { id: doc.id, fields, words: previous.entry.words };
  }
  const fields: Record<string, IndexScalar[]> = {
    id: [doc.id],
    // Shared with the document, not copied: neither is ever changed in place.
    studyIds: doc.studyIds as IndexScalar[],
    networkIds: doc.networkIds as IndexScalar[],
    published: published(isPublished),
    revisionStatus: status(state.revisionStatus),
    revisionsAhead: count(state.revisionsAhead),
    lastModifiedDate: [state.lastUpdate],
  };
  let text = addLocalized(fields, "name", doc.name, "");
  text = addLocalized(fields, "acronym", doc.acronym, text);
  text = addLocalized(fields, "description", doc.description, text);
  addModel(fields, "model", doc.model);
  const words =
    previous && previous.entry.id === doc.id && sameTexts(previous.record.document, doc) ? previous.entry.words : sortedWords(text);
  return { id: doc.id, fields, words };
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
