/** First index in the sorted `list` whose item is ≥ `key` (UTF-16 code unit order, as `<`). */
export function lowerBound(list: readonly string[], key: string): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Most items a chunk holds; a full chunk is split in two halves. */
const CHUNK = 512;

/**
 * A sorted list kept as consecutive sorted chunks of at most CHUNK items. An insertion or removal
 * moves at most a chunk's items (and, when a chunk is split or emptied, the chunk list), where one
 * array moves half the list: at 20,000 networks that was 10–20 µs per write for each list order
 * or sorted dictionary that a served list had made.
 */
export class SortedChunks<T> {
  private readonly chunks: T[][] = [];

  /** `sorted` is in `compare` order; items comparing equal are the same item. */
  constructor(
    private readonly compare: (a: T, b: T) => number,
    sorted: readonly T[],
  ) {
    for (let i = 0; i < sorted.length; i += CHUNK / 2) this.chunks.push(sorted.slice(i, i + CHUNK / 2));
  }

  /** The first chunk whose last item is ≥ `item`, or the last chunk; the list is not empty. */
  private chunkOf(item: T): number {
    let lo = 0;
    let hi = this.chunks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const chunk = this.chunks[mid]!;
      if (this.compare(chunk[chunk.length - 1]!, item) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The first index in `chunk` whose item is ≥ `item`. */
  private position(chunk: readonly T[], item: T): number {
    let lo = 0;
    let hi = chunk.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.compare(chunk[mid]!, item) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  insert(item: T): void {
    if (this.chunks.length === 0) {
      this.chunks.push([item]);
      return;
    }
    const c = this.chunkOf(item);
    const chunk = this.chunks[c]!;
    chunk.splice(this.position(chunk, item), 0, item);
    if (chunk.length > CHUNK) this.chunks.splice(c + 1, 0, chunk.splice(CHUNK / 2));
  }

  /** Removes the item comparing equal to `item`, if there is one. */
  remove(item: T): void {
    if (this.chunks.length === 0) return;
    const c = this.chunkOf(item);
    const chunk = this.chunks[c]!;
    const i = this.position(chunk, item);
    if (i === chunk.length || this.compare(chunk[i]!, item) !== 0) return;
    chunk.splice(i, 1);
    if (chunk.length === 0) this.chunks.splice(c, 1);
  }

  /** The items in order, from the first that is ≥ `start` (from the first item without it). */
  *from(start?: T): Generator<T> {
    let c = 0;
    let i = 0;
    if (start !== undefined && this.chunks.length > 0) {
      c = this.chunkOf(start);
      i = this.position(this.chunks[c]!, start);
    }
    for (; c < this.chunks.length; c++, i = 0) {
      const chunk = this.chunks[c]!;
      for (; i < chunk.length; i++) yield chunk[i]!;
    }
  }
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The keys of a dictionary in order, for prefix ranges. The order is built at the first ordered read
 * (so loading thousands of networks at open costs one sort, not thousands of insertions) and then
 * kept by insertion and removal, so a write that brings a new key costs an insertion instead of a
 * re-sort of the whole vocabulary at the next query.
 */
export class SortedKeys {
  private sorted: SortedChunks<string> | undefined;

  /** `key` became a key of the dictionary. */
  added(key: string): void {
    this.sorted?.insert(key);
  }

  /** `key` is no longer a key of the dictionary. */
  removed(key: string): void {
    this.sorted?.remove(key);
  }

  /** Forgets the order (the dictionary is being rebuilt). */
  reset(): void {
    this.sorted = undefined;
  }

  /** The keys starting with `prefix` (all keys for ""), in order; `keys` lists the dictionary. */
  *withPrefix(prefix: string, keys: () => Iterable<string>): Generator<string> {
    const sorted = (this.sorted ??= new SortedChunks(compareStrings, [...keys()].sort()));
    for (const key of sorted.from(prefix)) {
      if (!key.startsWith(prefix)) return;
      yield key;
    }
  }
}
