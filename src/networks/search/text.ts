/**
 * Text folding shared by id derivation and search, so that "Santé", "SANTE" and "sante" meet.
 *
 * The definitions are regular expressions (`foldByRegex`, and words as the runs of `[\p{L}\p{N}]` of
 * the folded text); the functions used take a character scan instead wherever the scan gives the
 * same answer (ASCII words, accents of the Combining Diacritical Marks block), because Unicode
 * property classes cost a few microseconds per call and every write folds and splits its names and
 * descriptions.
 */

const COMBINING_MARKS = /\p{M}+/gu;
// biome-ignore lint/suspicious/noControlCharactersInRegex: the range starts at NUL: every character past ASCII
const NON_ASCII = /[^\x00-\x7f]/;
const WORD = /[\p{L}\p{N}]+/gu;

// No code unit below U+0300 is a mark, and U+0300–U+036F (Combining Diacritical Marks, what NFD
// splits Latin accents into) are all marks: text whose only non-ASCII-range units after NFD lie
// there loses exactly those units to the regular expression.
const FIRST_MARK = 0x300;
const LAST_LATIN_MARK = 0x36f;

/** Lower case without accents: NFD, then combining marks dropped, then lower case. */
export function foldByRegex(text: string): string {
  return text.normalize("NFD").replace(COMBINING_MARKS, "").toLowerCase();
}

/** `foldByRegex`, with a scan for text whose marks are all Latin accents. */
export function fold(text: string): string {
  // ASCII text has nothing to decompose and no marks: lower case is all.
  if (!NON_ASCII.test(text)) return text.toLowerCase();
  const nfd = text.normalize("NFD");
  let out = "";
  let from = 0;
  for (let i = 0; i < nfd.length; i++) {
    const c = nfd.charCodeAt(i);
    if (c < FIRST_MARK) continue;
    if (c > LAST_LATIN_MARK) return foldByRegex(text);
    if (i > from) out += nfd.slice(from, i);
    from = i + 1;
  }
  return (from === 0 ? nfd : out + nfd.slice(from)).toLowerCase();
}

/**
 * The text with each `<…>` replaced by a space, as `text.replace(/<[^>]*>/g, " ")` does. That regular
 * expression rescans the rest of the text from every `<` that no `>` follows, which made a
 * description of 200,000 `<` take 25 s to index; once a `<` has no `>` after it, no later one has.
 */
function withoutTags(text: string): string {
  let out = "";
  let from = 0;
  for (;;) {
    const open = text.indexOf("<", from);
    const close = open < 0 ? -1 : text.indexOf(">", open + 1);
    if (close < 0) return out + text.slice(from);
    out += `${text.slice(from, open)} `;
    from = close + 1;
  }
}

function untagged(text: string): string {
  return text.includes("<") ? withoutTags(text) : text;
}

/** Folded words of a text; descriptions may hold HTML, whose tags are not words. */
export function words(text: string): string[] {
  const folded = fold(untagged(text));
  // In ASCII, the letters and digits of WORD are A–Z, a–z and 0–9, and folded text is lower case.
  const out: string[] = [];
  let start = -1;
  for (let i = 0; i < folded.length; i++) {
    const c = folded.charCodeAt(i);
    if (c >= 0x80) return folded.match(WORD) ?? [];
    if ((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39)) {
      if (start < 0) start = i;
    } else if (start >= 0) {
      out.push(folded.slice(start, i));
      start = -1;
    }
  }
  if (start >= 0) out.push(folded.slice(start));
  return out;
}

// Up to this many words are sorted by insertion: Array.prototype.sort costs more on a dozen items.
const INSERTION_SORT_MAX = 32;

/** The distinct words of a text in order (UTF-16 code unit order, as `<`). */
export function sortedWords(text: string): string[] {
  const list = words(text);
  if (list.length > INSERTION_SORT_MAX) {
    list.sort();
  } else {
    for (let i = 1; i < list.length; i++) {
      const w = list[i]!;
      let j = i - 1;
      while (j >= 0 && list[j]! > w) {
        list[j + 1] = list[j]!;
        j--;
      }
      list[j + 1] = w;
    }
  }
  let n = 0;
  for (let i = 0; i < list.length; i++) if (i === 0 || list[i] !== list[n - 1]) list[n++] = list[i]!;
  // A copy of exactly n: an index entry keeps its words as long as the network lives, and the list
  // grown by push would keep its spare capacity with them.
  return list.slice(0, n);
}
