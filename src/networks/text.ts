/**
 * Text folding shared by id derivation and search, so that "Santé", "SANTE" and "sante" meet.
 */

const COMBINING_MARKS = /\p{M}+/gu;
const NON_ASCII = /[^\x00-\x7f]/;

/** Lower case without accents (NFD then combining marks dropped). */
export function fold(text: string): string {
  // ASCII text has nothing to decompose and no marks: lower case is all (a shortcut, same result).
  if (!NON_ASCII.test(text)) return text.toLowerCase();
  return text.normalize("NFD").replace(COMBINING_MARKS, "").toLowerCase();
}

const WORD = /[\p{L}\p{N}]+/gu;

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

/** Folded words of a text; descriptions may hold HTML, whose tags are not words. */
export function words(text: string): string[] {
  // The maximal runs of letters and digits: what splitting on the runs of anything else leaves.
  return fold(text.includes("<") ? withoutTags(text) : text).match(WORD) ?? [];
}

/** The distinct words of a text in order (UTF-16 code unit order, as `<`). */
export function sortedWords(text: string): string[] {
  const list = words(text).sort();
  let n = 0;
  for (let i = 0; i < list.length; i++) if (i === 0 || list[i] !== list[n - 1]) list[n++] = list[i]!;
  list.length = n;
  return list;
}
