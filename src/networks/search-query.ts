import type { IndexEntry, IndexScalar } from "./search-entry.js";
import { foldedValuesAt, foldedWords, valuesAt } from "./search-entry.js";
import { isCall, type RqlArg, type RqlCall, type RqlScalar, type RqlValue } from "./rql.js";
import { fold } from "./text.js";
import type { WordIndex } from "./word-index.js";

/**
 * RQL tree → predicate over index entries. Everything that can be wrong with a parsed query (unknown
 * operator or field, wrong arguments) is found here, before any entry is looked at.
 */

export type EntryPredicate = (entry: IndexEntry) => boolean;

export class RqlQueryError extends Error {}

const FIELD_ROOTS = new Set([
  "id", "name", "acronym", "description", "studyIds", "networkIds", "published", "revisionStatus",
  "revisionsAhead", "lastModifiedDate", "model",
]);

function fail(call: RqlCall, message: string): never {
  throw new RqlQueryError(`${message} (${call.op} at position ${call.at})`);
}

function fieldArg(call: RqlCall, arg: RqlArg | undefined): string {
  if (typeof arg !== "string" || arg === "") fail(call, "Expected a field name");
  if (!FIELD_ROOTS.has(arg.split(".")[0]!)) fail(call, `Unknown field "${arg}"`);
  return arg;
}

function scalarArg(call: RqlCall, arg: RqlArg | undefined): RqlScalar {
  if (arg === undefined || isCall(arg) || Array.isArray(arg)) fail(call, "Expected a single value");
  return arg;
}

function listArg(call: RqlCall, arg: RqlArg | undefined): RqlScalar[] {
  if (arg === undefined || isCall(arg)) fail(call, "Expected a list of values");
  const list: RqlValue[] = Array.isArray(arg) ? arg : [arg];
  return list.map((v) => scalarArg(call, v));
}

function arity(call: RqlCall, min: number, max: number): void {
  if (call.args.length < min || call.args.length > max) {
    fail(call, min === max ? `Expected ${min} argument(s)` : `Expected ${min} to ${max} arguments`);
  }
}

// Query values arrive auto-converted ("123" → 123): compare as text unless both sides share a type.
function same(a: IndexScalar, b: RqlScalar): boolean {
  return typeof a === typeof b ? a === b : String(a) === String(b);
}

function order(a: IndexScalar, b: RqlScalar): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  const x = String(a);
  const y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

function globRegExp(pattern: string): RegExp {
  const body = pattern.split("*").map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*");
  return new RegExp(`^${body}$`, "s");
}

/** First index in the sorted `list` whose item is ≥ `word`. */
function lowerBound(list: readonly string[], word: string): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]! < word) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** One search word: a plain word or `heal*` matches word prefixes; an inner `*` is a wildcard. */
function wordMatcher(term: string): (sorted: readonly string[]) => boolean {
  const stem = term.replace(/\*+$/, "");
  if (!stem.includes("*")) {
    return (sorted) => {
      const i = lowerBound(sorted, stem);
      return i < sorted.length && sorted[i]!.startsWith(stem);
    };
  }
  const re = globRegExp(term.endsWith("*") ? term : `${term}*`);
  return (sorted) => sorted.some((w) => re.test(w));
}

/** The same word rule answered by the inverted index: the ids that have such a word. */
function wordIds(words: WordIndex, term: string): Set<string> {
  const stem = term.replace(/\*+$/, "");
  if (!stem.includes("*")) return words.withPrefix(stem);
  const re = globRegExp(term.endsWith("*") ? term : `${term}*`);
  return words.matching((w) => re.test(w));
}

function matchPredicate(call: RqlCall, words: WordIndex | undefined): EntryPredicate {
  arity(call, 1, 2);
  const field = call.args.length === 2 ? fieldArg(call, call.args[0]) : undefined;
  const text = String(scalarArg(call, call.args[call.args.length - 1]));
  const terms = fold(text).split(/[^\p{L}\p{N}*]+/u).filter((t) => t.replace(/\*/g, "") !== "");
  if (terms.length === 0) fail(call, "Expected words to match");
  if (field === undefined && words) {
    const sets = terms.map((t) => wordIds(words, t));
    return (e) => sets.every((s) => s.has(e.id));
  }
  const matchers = terms.map(wordMatcher);
  if (field === undefined) return (e) => matchers.every((m) => m(e.words));
  return (e) => {
    const sorted = [...new Set(foldedWords(e, field))].sort();
    return matchers.every((m) => m(sorted));
  };
}

function compileCall(call: RqlCall, words: WordIndex | undefined): EntryPredicate {
  switch (call.op) {
    case "and":
    case "or": {
      const parts = call.args.map((a) => {
        if (!isCall(a)) fail(call, "Expected queries as arguments");
        return compileCall(a, words);
      });
      return call.op === "and" ? (e) => parts.every((p) => p(e)) : (e) => parts.some((p) => p(e));
    }
    case "not": {
      arity(call, 1, 1);
      const inner = call.args[0]!;
      if (!isCall(inner)) fail(call, "Expected a query as argument");
      const p = compileCall(inner, words);
      return (e) => !p(e);
    }
    case "eq":
    case "ne": {
      arity(call, 2, 2);
      const field = fieldArg(call, call.args[0]);
      const value = scalarArg(call, call.args[1]);
      const hit: EntryPredicate = (e) => valuesAt(e, field).some((v) => same(v, value));
      return call.op === "eq" ? hit : (e) => !hit(e);
    }
    case "in":
    case "out": {
      arity(call, 2, 2);
      const field = fieldArg(call, call.args[0]);
      const values = listArg(call, call.args[1]);
      const hit: EntryPredicate = (e) => valuesAt(e, field).some((v) => values.some((w) => same(v, w)));
      return call.op === "in" ? hit : (e) => !hit(e);
    }
    case "lt":
    case "le":
    case "gt":
    case "ge": {
      arity(call, 2, 2);
      const field = fieldArg(call, call.args[0]);
      const value = scalarArg(call, call.args[1]);
      const accept = { lt: (c: number) => c < 0, le: (c: number) => c <= 0, gt: (c: number) => c > 0, ge: (c: number) => c >= 0 }[call.op];
      return (e) => valuesAt(e, field).some((v) => accept(order(v, value)));
    }
    case "like": {
      arity(call, 2, 2);
      const field = fieldArg(call, call.args[0]);
      const re = globRegExp(fold(String(scalarArg(call, call.args[1]))));
      return (e) => foldedValuesAt(e, field).some((v) => re.test(v));
    }
    case "exists": {
      arity(call, 1, 2);
      const field = fieldArg(call, call.args[0]);
      const wanted = call.args.length === 2 ? scalarArg(call, call.args[1]) !== false : true;
      return (e) => valuesAt(e, field).length > 0 === wanted;
    }
    case "match":
      return matchPredicate(call, words);
    default:
      return fail(call, `Unknown operator "${call.op}"`);
  }
}

/**
 * `words`, when given, must hold exactly the words of the entries the predicate will see: `match()`
 * then looks them up once per query instead of per entry.
 */
export function compileQuery(query: RqlCall, words?: WordIndex): EntryPredicate {
  return compileCall(query, words);
}
