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

/**
 * The keys of a dictionary in order, for prefix ranges. The order is built at the first ordered read
 * (so loading thousands of networks at open costs one sort, not thousands of splices) and then kept
 * by binary insertion and removal, so a write that brings a new key costs a splice instead of a
 * re-sort of the whole vocabulary at the next query.
 */
export class SortedKeys {
  private sorted: string[] | undefined;

  /** `key` became a key of the dictionary. */
  added(key: string): void {
    if (this.sorted) this.sorted.splice(lowerBound(this.sorted, key), 0, key);
  }

  /** `key` is no longer a key of the dictionary. */
  removed(key: string): void {
    if (!this.sorted) return;
    const i = lowerBound(this.sorted, key);
    if (this.sorted[i] === key) this.sorted.splice(i, 1);
  }

  /** Forgets the order (the dictionary is being rebuilt). */
  reset(): void {
    this.sorted = undefined;
  }

  /** The keys starting with `prefix` (all keys for ""), in order; `keys` lists the dictionary. */
  *withPrefix(prefix: string, keys: () => Iterable<string>): Generator<string> {
    const sorted = (this.sorted ??= [...keys()].sort());
    for (let i = lowerBound(sorted, prefix); i < sorted.length && sorted[i]!.startsWith(prefix); i++) yield sorted[i]!;
  }
}
