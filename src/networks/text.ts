/**
 * Text folding shared by id derivation and search, so that "Santé", "SANTE" and "sante" meet.
 */

const COMBINING_MARKS = /\p{M}+/gu;

/** Lower case without accents (NFD then combining marks dropped). */
export function fold(text: string): string {
  return text.normalize("NFD").replace(COMBINING_MARKS, "").toLowerCase();
}

const TAG = /<[^>]*>/g;
const NON_WORD = /[^\p{L}\p{N}]+/u;

/** Folded words of a text; descriptions may hold HTML, whose tags are not words. */
export function words(text: string): string[] {
  return fold(text.replace(TAG, " ")).split(NON_WORD).filter((w) => w.length > 0);
}
