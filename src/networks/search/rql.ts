import { excerpt, MAX_QUERY_DEPTH } from "../limits.js";

/**
 * RQL parser. The `rql` package (0.3.3) is not used: it reports no error position (the contract asks
 * for one), refuses non-ASCII characters unless percent-encoded (accented search words are normal
 * here) and rewrites the query text with regexes before parsing, so its errors do not map back to
 * what the caller wrote. This parser accepts the same syntax: calls `op(args)`, `&`/`|` (and `,` at
 * top level), FIQL `field=value`, `field!=value`, `field=op=value`, arrays `(a,b)`, percent-encoding,
 * quoted strings, and the auto-conversion of true/false/null/numbers (`string:` keeps text).
 */

export type RqlScalar = string | number | boolean | null;
export type RqlValue = RqlScalar | RqlValue[];

export interface RqlCall {
  readonly kind: "call";
  readonly op: string;
  readonly args: readonly RqlArg[];
  /** Offset of the operator in the query text, for error messages. */
  readonly at: number;
}

export type RqlArg = RqlCall | RqlValue;

export class RqlSyntaxError extends Error {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(`${message} at position ${position}`);
  }
}

export function isCall(arg: RqlArg): arg is RqlCall {
  return typeof arg === "object" && arg !== null && !Array.isArray(arg);
}

const FIQL_OPERATORS: Record<string, string> = { "=": "eq", "==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge" };
// Characters that end a bare word; everything else (spaces inside, accents, `*`, `.`) belongs to it.
const DELIMITERS = new Set(["(", ")", "&", "|", ",", "=", "<", ">", "!", "'", '"']);

function convert(raw: string, at: number): RqlScalar {
  let text: string;
  try {
    text = decodeURIComponent(raw);
  } catch {
    throw new RqlSyntaxError(`Bad percent-encoding in "${excerpt(raw)}"`, at);
  }
  if (text.startsWith("string:")) return text.slice("string:".length);
  if (text === "true") return true;
  if (text === "false") return false;
  if (text === "null") return null;
  const n = Number(text);
  if (text !== "" && !Number.isNaN(n) && String(n) === text) return n;
  return text;
}

class Parser {
  private pos = 0;
  /** Parentheses open at `pos`: the parser recurses once per level, so the level is capped. */
  private depth = 0;

  constructor(private readonly text: string) {}

  parse(): RqlCall {
    const query = this.conjunction(true);
    if (this.pos < this.text.length) this.fail(`Unexpected "${this.text[this.pos]}"`);
    return query;
  }

  private fail(message: string): never {
    throw new RqlSyntaxError(message, this.pos);
  }

  private skipSpaces(): void {
    while (this.text[this.pos] === " ") this.pos++;
  }

  private peek(): string | undefined {
    this.skipSpaces();
    return this.text[this.pos];
  }

  private expect(c: string): void {
    if (this.peek() !== c) this.fail(this.pos >= this.text.length ? `Expected "${c}" but the query ended` : `Expected "${c}"`);
    this.pos++;
  }

  /** Consumes the "(" at `pos`. */
  private open(): void {
    if (this.depth === MAX_QUERY_DEPTH) this.fail(`Parentheses nested deeper than ${MAX_QUERY_DEPTH} levels`);
    this.depth++;
    this.pos++;
  }

  private close(): void {
    this.expect(")");
    this.depth--;
  }

  /** `a&b|c` mixes conjunctions, which RQL refuses: parentheses must group each kind. */
  private conjunction(topLevel: boolean): RqlCall {
    const at = this.pos;
    const terms: RqlCall[] = [this.term()];
    let op: "and" | "or" | undefined;
    for (;;) {
      const c = this.peek();
      const next = c === "&" || (c === "," && topLevel) ? "and" : c === "|" ? "or" : undefined;
      if (!next) break;
      if (op && op !== next) this.fail("Cannot mix & and | without parentheses");
      op = next;
      this.pos++;
      terms.push(this.term());
    }
    return terms.length === 1 ? terms[0]! : { kind: "call", op: op!, args: terms, at };
  }

  private term(): RqlCall {
    if (this.peek() === "(") {
      this.open();
      const inner = this.conjunction(true);
      this.close();
      return inner;
    }
    const at = this.pos;
    const word = this.bareWord();
    if (word === "")
      this.fail(this.pos >= this.text.length ? "Expected a query term but the query ended" : `Unexpected "${this.text[this.pos]}"`);
    const c = this.peek();
    if (c === "(") {
      this.open();
      const args = this.peek() === ")" ? [] : this.args();
      this.close();
      return { kind: "call", op: word, args, at };
    }
    const op = this.fiqlOperator();
    if (!op) this.fail(`Expected "(" or a comparison after "${excerpt(word)}"`);
    return { kind: "call", op, args: [convert(word, at), this.value()], at };
  }

  private fiqlOperator(): string | undefined {
    const rest = this.text.slice(this.pos);
    const named = /^=([a-zA-Z]+)=/.exec(rest);
    if (named) {
      this.pos += named[0].length;
      return named[1];
    }
    for (const symbol of ["==", "!=", "<=", ">=", "=", "<", ">"]) {
      if (rest.startsWith(symbol)) {
        this.pos += symbol.length;
        return FIQL_OPERATORS[symbol];
      }
    }
    return undefined;
  }

  private args(): RqlArg[] {
    const args: RqlArg[] = [this.arg()];
    while (this.peek() === ",") {
      this.pos++;
      args.push(this.arg());
    }
    return args;
  }

  private arg(): RqlArg {
    const c = this.peek();
    if (c === "(") return this.value();
    const start = this.pos;
    if (c !== "'" && c !== '"') {
      const word = this.bareWord();
      if (this.peek() === "(" && word !== "") {
        this.open();
        const args = this.peek() === ")" ? [] : this.args();
        this.close();
        return { kind: "call", op: word, args, at: start };
      }
      this.pos = start;
    }
    return this.value();
  }

  private value(): RqlValue {
    const c = this.peek();
    if (c === "(") {
      this.open();
      const items: RqlValue[] = [];
      if (this.peek() !== ")") {
        items.push(this.value());
        while (this.peek() === ",") {
          this.pos++;
          items.push(this.value());
        }
      }
      this.close();
      return items;
    }
    if (c === "'" || c === '"') return this.quoted(c);
    const at = this.pos;
    const word = this.bareWord();
    if (word === "" && this.pos < this.text.length && !DELIMITERS.has(this.text[this.pos]!)) this.fail("Expected a value");
    if (this.pos < this.text.length && ["=", "<", ">", "!", "'", '"'].includes(this.text[this.pos]!)) {
      this.fail(`Unexpected "${this.text[this.pos]}"`);
    }
    return convert(word, at);
  }

  private quoted(quote: string): string {
    const start = this.pos;
    this.pos++;
    let out = "";
    while (this.pos < this.text.length && this.text[this.pos] !== quote) {
      if (this.text[this.pos] === "\\" && this.pos + 1 < this.text.length) this.pos++;
      out += this.text[this.pos];
      this.pos++;
    }
    if (this.pos >= this.text.length) throw new RqlSyntaxError("Unterminated quoted string", start);
    this.pos++;
    return out;
  }

  private bareWord(): string {
    this.skipSpaces();
    const start = this.pos;
    while (this.pos < this.text.length && !DELIMITERS.has(this.text[this.pos]!)) this.pos++;
    return this.text.slice(start, this.pos).trim();
  }
}

/** The query as a tree whose root is a call (`and` of the top-level terms, or the single term). */
export function parseRql(text: string): RqlCall {
  return new Parser(text).parse();
}
