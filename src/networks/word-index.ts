import { SortedKeys } from "./sorted-keys.js";

/**
 * In-memory inverted index of the folded words of names, acronyms and descriptions, so that
 * `match()` looks words up instead of visiting every network. Rebuilt from the index entries at
 * open and kept in step with the mirror.
 */
export class WordIndex {
  private readonly ids = new Map<string, Set<string>>();
  private readonly vocabulary = new SortedKeys();

  add(id: string, words: readonly string[]): void {
    for (const w of words) {
      let set = this.ids.get(w);
      if (!set) {
        this.ids.set(w, (set = new Set()));
        this.vocabulary.added(w);
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
        this.vocabulary.removed(w);
      }
    }
  }

  clear(): void {
    this.ids.clear();
    this.vocabulary.reset();
  }

  /** Ids having a word that starts with `stem`; read it before the next change (it may be live). */
  withPrefix(stem: string): ReadonlySet<string> {
    return this.union(this.vocabulary.withPrefix(stem, () => this.ids.keys()));
  }

  /** Ids having a word that starts with `prefix` and that the test accepts (wildcards inside a word). */
  matching(prefix: string, test: (word: string) => boolean): ReadonlySet<string> {
    const words = [...this.vocabulary.withPrefix(prefix, () => this.ids.keys())].filter(test);
    return this.union(words);
  }

  // A single word's set is handed out as is: copying thousands of ids per query is the cost to avoid.
  private union(words: Iterable<string>): ReadonlySet<string> {
    let only: Set<string> | undefined;
    let out: Set<string> | undefined;
    for (const w of words) {
      const set = this.ids.get(w)!;
      if (out) for (const id of set) out.add(id);
      else if (only) {
        out = new Set(only);
        for (const id of set) out.add(id);
      } else only = set;
    }
    return out ?? only ?? new Set();
  }
}
