/**
 * In-memory inverted index of the folded words of names, acronyms and descriptions, so that
 * `match()` looks words up instead of visiting every network. Rebuilt from the index entries at
 * open and kept in step with the mirror.
 */
export class WordIndex {
  private readonly ids = new Map<string, Set<string>>();
  /** The vocabulary in order, for prefix ranges; recomputed when a new word has arrived. */
  private sorted: string[] | undefined;

  add(id: string, words: readonly string[]): void {
    for (const w of words) {
      let set = this.ids.get(w);
      if (!set) {
        this.ids.set(w, (set = new Set()));
        this.sorted = undefined;
      }
      set.add(id);
    }
  }

  remove(id: string, words: readonly string[]): void {
    for (const w of words) {
      const set = this.ids.get(w);
      if (!set) continue;
      set.delete(id);
      if (set.size === 0) {
        this.ids.delete(w);
        this.sorted = undefined;
      }
    }
  }

  /** Ids having a word that starts with `stem`. */
  withPrefix(stem: string): Set<string> {
    const vocabulary = (this.sorted ??= [...this.ids.keys()].sort());
    let lo = 0;
    let hi = vocabulary.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (vocabulary[mid]! < stem) lo = mid + 1;
      else hi = mid;
    }
    const out = new Set<string>();
    for (let i = lo; i < vocabulary.length && vocabulary[i]!.startsWith(stem); i++) {
      for (const id of this.ids.get(vocabulary[i]!)!) out.add(id);
    }
    return out;
  }

  /** Ids having a word that the test accepts (wildcards inside a word). */
  matching(test: (word: string) => boolean): Set<string> {
    const out = new Set<string>();
    for (const [w, set] of this.ids) if (test(w)) for (const id of set) out.add(id);
    return out;
  }
}
