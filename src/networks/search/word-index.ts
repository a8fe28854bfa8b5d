import { addTo, removeFrom, union, type Postings } from "./postings.js";
import { SortedKeys } from "./sorted-keys.js";

/**
 * In-memory inverted index of the folded words of names, acronyms and descriptions, so that
 * `match()` looks words up instead of visiting every network. Rebuilt from the index entries at
 * open and kept in step with the mirror.
 */
export class WordIndex {
  private readonly ids: Postings = new Map();
  private readonly vocabulary = new SortedKeys();

  add(id: string, words: readonly string[]): void {
    for (const w of words) if (addTo(this.ids, w, id)) this.vocabulary.added(w);
  }

  remove(id: string, words: readonly string[]): void {
    for (const w of words) if (removeFrom(this.ids, w, id)) this.vocabulary.removed(w);
  }

  /**
   * The words of `id` go from `before` to `after`: only the words that differ are touched. Both are
   * sorted and distinct, as every index entry holds them (see `sortedWords`), so one merge of the two
   * lists finds them without a set or a lookup of the words that stay.
   */
  replace(id: string, before: readonly string[], after: readonly string[]): void {
    if (before === after) return;
    let i = 0;
    let j = 0;
    while (i < before.length && j < after.length) {
      const b = before[i]!;
      const a = after[j]!;
      if (b === a) {
        i++;
        j++;
      } else if (b < a) {
        if (removeFrom(this.ids, b, id)) this.vocabulary.removed(b);
        i++;
      } else {
        if (addTo(this.ids, a, id)) this.vocabulary.added(a);
        j++;
      }
    }
    for (; i < before.length; i++) if (removeFrom(this.ids, before[i]!, id)) this.vocabulary.removed(before[i]!);
    for (; j < after.length; j++) if (addTo(this.ids, after[j]!, id)) this.vocabulary.added(after[j]!);
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
    const lists = [];
    for (const w of words) lists.push(this.ids.get(w)!);
    return union(lists);
  }
}
