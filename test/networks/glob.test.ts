import { expect } from "chai";
import { globMatcher, literalPrefix } from "../../src/networks/search/glob.js";
import { words } from "../../src/networks/search/text.js";

/**
 * The linear matchers against the simplest definitions of what they replace, on many small random
 * inputs: a table of "pattern prefix matches text prefix" for `*` globs, and the regular expression
 * that used to strip HTML tags (fine on inputs this small).
 */

/** Deterministic, so a failure shows the same case on every run. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function randomText(next: () => number, alphabet: readonly string[], maxLength: number): string {
  let out = "";
  const length = Math.floor(next() * (maxLength + 1));
  for (let i = 0; i < length; i++) out += alphabet[Math.floor(next() * alphabet.length)];
  return out;
}

/** Whole-text glob match by dynamic programming over (pattern, text) prefixes. */
function referenceMatch(pattern: string, text: string): boolean {
  let row = [true, ...Array<boolean>(text.length).fill(false)];
  for (const p of pattern) {
    const next = [p === "*" && row[0]!];
    for (let j = 1; j <= text.length; j++) next[j] = p === "*" ? row[j]! || next[j - 1]! : row[j - 1]! && p === text[j - 1];
    row = next;
  }
  return row[text.length]!;
}

describe("wildcard matching", () => {
  it("agrees with the reference matcher on random patterns and texts", () => {
    const next = random(42);
    // Few letters so that matches are frequent; characters that were special in the regular expression
    // (".", "?", "(", "\n") must stand for themselves; "é" folds, but matching sees folded text only.
    const letters = ["a", "b", ".", "?", "(", "\n", "é"];
    let matched = 0;
    for (let i = 0; i < 20_000; i++) {
      const pattern = randomText(next, [...letters, "*", "*", "*", "*"], 8);
      const text = randomText(next, letters, 10);
      const expected = referenceMatch(pattern, text);
      if (expected) matched++;
      expect(globMatcher(pattern)(text), `${JSON.stringify(pattern)} on ${JSON.stringify(text)}`).to.equal(expected);
      expect(text.startsWith(literalPrefix(pattern)) || !expected, "every match starts with the literal prefix").to.equal(true);
    }
    expect(matched, "the cases exercise matches, not only misses").to.be.greaterThan(2000);
  });

  it("answers the patterns that made a regular expression backtrack, at once", () => {
    const text = "a".repeat(10_000);
    expect(globMatcher(`${"*a".repeat(20)}*b`)(text)).to.equal(false);
    expect(globMatcher(`${"*a".repeat(20)}*b`)(`${text}b`)).to.equal(true);
    expect(globMatcher("*".repeat(100_000))(text)).to.equal(true);
    expect(globMatcher("a*a")("a"), "the first and last pieces do not share a character").to.equal(false);
    expect(globMatcher("ab*ba")("aba")).to.equal(false);
    expect(globMatcher("ab*ba")("abba")).to.equal(true);
  });

  it("drops HTML tags from indexed words as the regular expression did, in linear time", () => {
    const next = random(7);
    const regexWords = (text: string) =>
      text
        .replace(/<[^>]*>/g, " ")
        .toLowerCase()
        .match(/[\p{L}\p{N}]+/gu) ?? [];
    for (let i = 0; i < 5000; i++) {
      const text = randomText(next, ["<", ">", "a", "b", " ", "\n"], 16);
      expect(words(text), JSON.stringify(text)).to.deep.equal(regexWords(text));
    }
    expect(words(`${"<".repeat(300_000)}word`)).to.deep.equal(["word"], "a < that no > follows is text");
  });
});
