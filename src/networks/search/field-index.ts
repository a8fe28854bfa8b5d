import type { IndexEntry, IndexScalar } from "./search-entry.js";
import { covers } from "./search-entry.js";
import { addTo, removeFrom, union, type Ids, type Postings } from "./postings.js";
import { SortedKeys } from "./sorted-keys.js";
import { fold } from "./text.js";

/**
 * In-memory inverted index of the `fields` of index entries: for every field path, the ids per value.
 * Values are keyed by their text form (`String(v)`) because that is exactly how queries compare a
 * value with a query argument of another type (see `same` in search-query.ts): `5`, `"5"` meet, and
 * so do `null` and `"null"`. It holds only what the entries say, so it can always be rebuilt from them.
 *
 * The ids per value of a path are built at the first lookup that needs them, from the entries, and
 * kept from then on. Every value of every network is a field here (a dozen for a small model, one per
 * leaf of a large one), and each kept value costs a hash insertion per write; the paths that queries
 * ask for are few. `studyIds`, which the list's `study` parameter reads, is kept from the start.
 */

/** The folded (lower case, unaccented) text of the non-null values, as `like` compares them. */
function foldedKeys(values: readonly IndexScalar[]): Set<string> {
  const out = new Set<string>();
  for (const v of values) if (v !== null) out.add(fold(String(v)));
  return out;
}

const BUILT_FROM_THE_START = new Set(["studyIds"]);

class PathIndex {
  constructor(readonly field: string) {
    if (BUILT_FROM_THE_START.has(field)) this.byValue = new Map();
  }

  /** Ids per value text; undefined until a lookup needs them (see FieldIndex.byValueOf). */
  byValue: Postings | undefined;
  /** How many ids have at least one value at this path (the path is dropped at 0). */
  count = 0;
  /**
   * Ids with at least one value at this path, for `exists`. Built at the first `exists` on this path
   * (from the entries), then kept: most paths are never asked for, and every network has values at
   * a dozen paths, so keeping them all would cost a dozen set insertions per creation.
   */
  present: Set<string> | undefined;
  /**
   * Folded values → ids, for `like`. Built at the first `like` on this path, since folding every
   * value of every network at open would cost more than most catalogues ever spend on `like`.
   */
  folded: Postings | undefined;
  readonly foldedOrder = new SortedKeys();

  add(id: string, values: readonly IndexScalar[]): void {
    if (values.length === 0) return;
    this.count++;
    this.present?.add(id);
    if (this.byValue) for (const v of values) addTo(this.byValue, String(v), id);
    if (this.folded) for (const k of foldedKeys(values)) if (addTo(this.folded, k, id)) this.foldedOrder.added(k);
  }

  remove(id: string, values: readonly IndexScalar[]): void {
    if (values.length === 0) return;
    this.count--;
    this.present?.delete(id);
    if (this.byValue) for (const v of values) removeFrom(this.byValue, String(v), id);
    if (this.folded) for (const k of foldedKeys(values)) if (removeFrom(this.folded, k, id)) this.foldedOrder.removed(k);
  }

  /** The values of `id` here go from `before` to `after`: only the keys that differ are touched. */
  replace(id: string, before: readonly IndexScalar[], after: readonly IndexScalar[]): void {
    if (before.length === 0) return this.add(id, after);
    if (after.length === 0) return this.remove(id, before);
    const byValue = this.byValue;
    if (!byValue) {
      // Nothing per value is kept yet: the id has values here before and after.
    } else if (after.length === 1 && before.length === 1) {
      // The common case (state fields, single model values): no sets needed.
      const b = String(before[0]);
      const a = String(after[0]);
      if (b !== a) {
        removeFrom(byValue, b, id);
        addTo(byValue, a, id);
      }
    } else {
      const keys = new Set<string>();
      for (const v of after) keys.add(String(v));
      for (const v of before) {
        const k = String(v);
        if (!keys.has(k)) removeFrom(byValue, k, id);
      }
      for (const k of keys) addTo(byValue, k, id);
    }
    if (this.folded) {
      const was = foldedKeys(before);
      const is = foldedKeys(after);
      for (const k of was) if (!is.has(k) && removeFrom(this.folded, k, id)) this.foldedOrder.removed(k);
      for (const k of is) if (!was.has(k) && addTo(this.folded, k, id)) this.foldedOrder.added(k);
    }
  }
}

function sameValues(a: readonly IndexScalar[], b: readonly IndexScalar[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const NONE: readonly IndexScalar[] = [];

export class FieldIndex {
  private readonly paths = new Map<string, PathIndex>();

  /** `entries` lists the entries currently indexed, from which lookups are built at their first use. */
  constructor(private readonly entries: () => Iterable<IndexEntry>) {}

  add(entry: IndexEntry): void {
    const fields = entry.fields;
    for (const path in fields) {
      const values = fields[path]!;
      if (values.length === 0) continue;
      let index = this.paths.get(path);
      if (!index) this.paths.set(path, (index = new PathIndex(path)));
      index.add(entry.id, values);
    }
  }

  /** `entry` must be the very entry that was added for its id. */
  remove(entry: IndexEntry): void {
    const fields = entry.fields;
    for (const path in fields) {
      const values = fields[path]!;
      const index = this.paths.get(path);
      if (!index) continue;
      index.remove(entry.id, values);
      if (index.count === 0) this.paths.delete(path);
    }
  }

  /**
   * `before` (the very entry that was added for its id) is replaced by `after` (same id): only the
   * paths whose values differ are touched, and within them only the keys that differ.
   */
  replace(before: IndexEntry, after: IndexEntry): void {
    const id = after.id;
    const was = before.fields;
    const is = after.fields;
    for (const path in is) {
      const values = is[path]!;
      const old = Object.hasOwn(was, path) ? was[path]! : NONE;
      if (sameValues(old, values)) continue;
      let index = this.paths.get(path);
      if (!index) {
        if (values.length === 0) continue;
        this.paths.set(path, (index = new PathIndex(path)));
      }
      index.replace(id, old, values);
      if (index.count === 0) this.paths.delete(path);
    }
    for (const path in was) {
      if (Object.hasOwn(is, path)) continue;
      const index = this.paths.get(path);
      if (!index) continue;
      index.remove(id, was[path]!);
      if (index.count === 0) this.paths.delete(path);
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

  // A single posting list is answered as is (no copy): callers only read it, and only during their
  // synchronous query.

  /** Ids having, under `path`, a value whose text form is one of `keys`. */
  withValues(path: string, keys: readonly string[]): ReadonlySet<string> {
    const lists: (Ids | undefined)[] = [];
    for (const index of this.covered(path)) {
      const byValue = this.byValueOf(index);
      for (const k of keys) lists.push(byValue.get(k));
    }
    return union(lists);
  }

  /** Ids having, under `path`, a value whose text form passes `accept` (one test per distinct value). */
  withValueKeys(path: string, accept: (key: string) => boolean): ReadonlySet<string> {
    const lists: Ids[] = [];
    for (const index of this.covered(path)) for (const [k, ids] of this.byValueOf(index)) if (accept(k)) lists.push(ids);
    return union(lists);
  }

  /** Ids having any value under `path`. */
  withAnyValue(path: string): ReadonlySet<string> {
    return union(this.covered(path).map((i) => this.presentOf(i)));
  }

  /** Ids having, under `path`, a folded value that starts with `prefix` and passes `test`. */
  withFolded(path: string, prefix: string, test: (folded: string) => boolean): ReadonlySet<string> {
    const lists: Ids[] = [];
    for (const index of this.covered(path)) {
      const folded = this.foldedOf(index);
      for (const k of index.foldedOrder.withPrefix(prefix, () => folded.keys())) if (test(k)) lists.push(folded.get(k)!);
    }
    return union(lists);
  }

  /** The values of `index`'s path in every indexed entry that has some. */
  private *valuesAt(index: PathIndex): Generator<[string, readonly IndexScalar[]]> {
    for (const entry of this.entries()) {
      const values = Object.hasOwn(entry.fields, index.field) ? entry.fields[index.field]! : NONE;
      if (values.length > 0) yield [entry.id, values];
    }
  }

  private byValueOf(index: PathIndex): Postings {
    if (index.byValue) return index.byValue;
    const byValue: Postings = new Map();
    for (const [id, values] of this.valuesAt(index)) for (const v of values) addTo(byValue, String(v), id);
    return (index.byValue = byValue);
  }

  private presentOf(index: PathIndex): Set<string> {
    if (index.present) return index.present;
    const present = new Set<string>();
    for (const [id] of this.valuesAt(index)) present.add(id);
    return (index.present = present);
  }

  private foldedOf(index: PathIndex): Postings {
    if (index.folded) return index.folded;
    const folded: Postings = new Map();
    for (const [id, values] of this.valuesAt(index)) for (const k of foldedKeys(values)) addTo(folded, k, id);
    index.foldedOrder.reset();
    return (index.folded = folded);
  }
}
