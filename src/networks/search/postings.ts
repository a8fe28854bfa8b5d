/**
 * Posting lists of the in-memory indexes: the ids having one key (a value, a folded value, a word).
 * Most keys of a catalogue belong to one network only (ids, names, e-mails, timestamps), so a key
 * with a single id holds that id as is; a Set is made when a second id comes. A write then allocates
 * no Set for its unique values, which is most of what indexing a network used to allocate.
 */
export type Ids = string | Set<string>;

export type Postings = Map<string, Ids>;

const EMPTY: ReadonlySet<string> = new Set();

/** Adds `id` under `key`; true when `key` is new. */
export function addTo(map: Postings, key: string, id: string): boolean {
  const ids = map.get(key);
  if (ids === undefined) {
    map.set(key, id);
    return true;
  }
  if (typeof ids === "string") {
    if (ids !== id) map.set(key, new Set([ids, id]));
  } else {
    ids.add(id);
  }
  return false;
}

/** Removes `id` from under `key`; true when `key` is gone. */
export function removeFrom(map: Postings, key: string, id: string): boolean {
  const ids = map.get(key);
  if (ids === undefined) return false;
  if (typeof ids === "string") {
    if (ids !== id) return false;
  } else {
    ids.delete(id);
    if (ids.size > 0) return false;
  }
  map.delete(key);
  return true;
}

/**
 * The union of posting lists. A single Set is answered as is (no copy): callers only read it, and
 * only before the next change.
 */
export function union(lists: Iterable<Ids | undefined>): ReadonlySet<string> {
  let only: Ids | undefined;
  let out: Set<string> | undefined;
  for (const ids of lists) {
    if (ids === undefined || (typeof ids !== "string" && ids.size === 0)) continue;
    if (out === undefined) {
      if (only === undefined) {
        only = ids;
        continue;
      }
      out = typeof only === "string" ? new Set([only]) : new Set(only);
    }
    if (typeof ids === "string") out.add(ids);
    else for (const id of ids) out.add(id);
  }
  if (out) return out;
  if (only === undefined) return EMPTY;
  return typeof only === "string" ? new Set([only]) : only;
}
