/**
 * `*` wildcard patterns (`like`, and the inner wildcards of `match` words) without regular
 * expressions: `^.*a.*a…b$` built from `*a*a…b` backtracks exponentially on a text that almost
 * matches, and one such query held the whole server for seconds. Here the pattern is cut at its
 * stars; the first piece must start the text, the last must end it, and the others are found left to
 * right with indexOf. Taking each piece's leftmost place never loses a match when `*` is the only
 * wildcard, so nothing is retried: each text costs at most one search per piece, O(text × pattern).
 * Every other character stands for itself; texts are compared by UTF-16 code units, as the regular
 * expression (without the `u` flag) compared them.
 */

export type TextTest = (text: string) => boolean;

export function globMatcher(pattern: string): TextTest {
  const pieces = pattern.split("*");
  if (pieces.length === 1) return (text) => text === pattern;
  const first = pieces[0]!;
  const last = pieces[pieces.length - 1]!;
  const middle = pieces.slice(1, -1).filter((p) => p !== "");
  const fixed = first.length + last.length;
  return (text) => {
    // The length test keeps the first and last pieces from sharing characters.
    if (text.length < fixed || !text.startsWith(first) || !text.endsWith(last)) return false;
    const end = text.length - last.length;
    let at = first.length;
    for (const piece of middle) {
      const found = text.indexOf(piece, at);
      if (found < 0 || found + piece.length > end) return false;
      at = found + piece.length;
    }
    return true;
  };
}

/** The text before the first `*` of a pattern: every match starts with it. */
export function literalPrefix(pattern: string): string {
  const star = pattern.indexOf("*");
  return star < 0 ? pattern : pattern.slice(0, star);
}
