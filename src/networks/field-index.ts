import type { IndexEntry, IndexScalar } from "./search-entry.js";
import { covers } from "./search-entry.js";
import { SortedKeys } from "./sorted-keys.js";
import { fold } from "./text.js";

/**
 * In-memory inverted index of the `fields` of index entries: for every field path, the ids per value.
 * Values are keyed by their text form (`String(v)`) because that is exactly how queries compare a
 * value with a query argument of another type (see `same` in search-query.ts): `5`, `"5"` meet, and
 * so do `null` and `"null"`. It holds only what the entries say, so it can always be rebuilt from them.
 */

const EMPTY: ReadonlySet<string> = new Set();

function addTo(map: Map<string, Set<string>>, key: string, id: string): boolean {
  let set = map.get(key);
  const created = !set;
  if (!set) map.set(key, (set = new Set()));
  set.add(id);
  return created;
}

function removeFrom(map: Map<string, Set<string>>, key: string, id: string): boolean {
  const set = map.get(key);
  if (!set) return false;
  set.delete(id);
  if (set.size > 0) return false;
  map.delete(key);
  return true;
}

/** The folded (lower case, unaccented) text of the non-null values, as `like` compares them. */
function foldedKeys(values: readonly IndexScalar[]): Set<string> {
  const out = new Set<string>();
  for (const v of values) if (v !== null) out.add(fold(String(v)));
  return out;
}

class PathIndex {
  constructor(readonly field: string) {}

  readonly byValue = new Map<string, Set<string>>();
  /** Ids with at least one value at this path (`exists`). */
  readonly present = new Set<string>();
  /**
   * Folded values → ids, for `like`. Built at the first `like` on this path, since folding every
   * value of every network at open would cost more than most catalogues ever spend on `like`.
   */
  folded: Map<string, Set<string>> | undefined;
  readonly foldedOrder = new SortedKeys();

  add(id: string, values: readonly IndexScalar[]): void {
    if (values.length === 0) return;
    this.present.add(id);
    for (const v of values) addTo(this.byValue, String(v), id);
    if (this.folded) for (const k of foldedKeys(values)) if (addTo(this.folded, k, id)) this.foldedOrder.added(k);
  }

  remove(id: string, values: readonly IndexScalar[]): void {
    if (values.length === 0) return;
    this.present.delete(id);
    for (const v of values) removeFrom(this.byValue, String(v), id);
    if (this.folded) for (const k of foldedKeys(values)) if (removeFrom(this.folded, k, id)) this.foldedOrder.removed(k);
  }
}

export class FieldIndex {
  private readonly paths = new Map<string, PathIndex>();

  /** `entryOf` answers the entries currently indexed (for building the folded dictionaries lazily). */
  constructor(private readonly entryOf: (id: string) => IndexEntry | undefined) {}

  add(entry: IndexEntry): void {
    for (const [path, values] of Object.entries(entry.fields)) {
      if (values.length === 0) continue;
      let index = this.paths.get(path);
      if (!index) this.paths.set(path, (index = new PathIndex(path)));
      index.add(entry.id, values);
    }
  }

  /** `entry` must be the very entry that was added for its id. */
  remove(entry: IndexEntry): void {
    for (const [path, values] of Object.entries(entry.fields)) {
      const index = this.paths.get(path);
      if (!index) continue;
      index.remove(entry.id, values);
      if (index.present.size === 0) this.paths.delete(path);
    }
  }

  clear(): void {
    this.paths.clear();
  }

  /** The field paths whose values a query on `path` sees: the path and, unless a leaf, those below. */
  private covered(path: string): PathIndex[] {
    const exact = this.paths.get(path);
    const out = exact ? [exact] : [];
    const below = `${path}.`;
    for (const [field, index] of this.paths) if (field !== path && field.startsWith(below) && covers(path, field)) out.push(index);
    return out;
  }

  private static union(sets: readonly ReadonlySet<string>[]): ReadonlySet<string> {
    const nonEmpty = sets.filter((s) => s.size > 0);
    // One set is answered as is (no copy): callers only read it, and only during this synchronous query.
    if (nonEmpty.length <= 1) return nonEmpty[0] ?? EMPTY;
    const out = new Set<string>();
    for (const s of nonEmpty) for (const id of s) out.add(id);
    return out;
  }

  /** Ids having, under `path`, a value whose text form is one of `keys`. */
  withValues(path: string, keys: readonly string[]): ReadonlySet<string> {
    const sets: ReadonlySet<string>[] = [];
    for (const index of this.covered(path)) for (const k of keys) sets.push(index.byValue.get(k) ?? EMPTY);
    return FieldIndex.union(sets);
  }

  /** Ids having, under `path`, a value whose text form passes `accept` (one test per distinct value). */
  withValueKeys(path: string, accept: (key: string) => boolean): ReadonlySet<string> {
    const sets: ReadonlySet<string>[] = [];
    for (const index of this.covered(path)) for (const [k, ids] of index.byValue) if (accept(k)) sets.push(ids);
    return FieldIndex.union(sets);
  }

  /** Ids having any value under `path`. */
  withAnyValue(path: string): ReadonlySet<string> {
    return FieldIndex.union(this.covered(path).map((i) => i.present));
  }

  /** Ids having, under `path`, a folded value that starts with `prefix` and passes `test`. */
  withFolded(path: string, prefix: string, test: (folded: string) => boolean): ReadonlySet<string> {
    const sets: ReadonlySet<string>[] = [];
    for (const index of this.covered(path)) {
      const folded = this.foldedOf(index);
      for (const k of index.foldedOrder.withPrefix(prefix, () => folded.keys())) if (test(k)) sets.push(folded.get(k)!);
    }
    return FieldIndex.union(sets);
  }

  private foldedOf(index: PathIndex): Map<string, Set<string>> {
    if (index.folded) return index.folded;
    const folded = new Map<string, Set<string>>();
    for (const id of index.present) for (const k of foldedKeys(this.entryOf(id)?.fields[index.field] ?? [])) addTo(folded, k, id);
    index.foldedOrder.reset();
    return (index.folded = folded);
  }
}
