import type { IndexEntry, IndexScalar } from "./search-entry.js";
import { foldedValuesAt, foldedWords, valuesAt } from "./search-entry.js";
import { globMatcher, literalPrefix } from "./glob.js";
import { excerpt, MAX_PATTERN_CHARS } from "../limits.js";
import { isCall, type RqlArg, type RqlCall, type RqlScalar, type RqlValue } from "./rql.js";
import { fold } from "./text.js";
import type { FieldIndex } from "./field-index.js";
import { lowerBound } from "./sorted-keys.js";
import type { WordIndex } from "./word-index.js";

/**
 * RQL tree → predicate over index entries. Everything that can be wrong with a parsed query (unknown
 * operator or field, wrong arguments) is found here, before any entry is looked at.
 */

export type EntryPredicate = (entry: IndexEntry) => boolean;

export class RqlQueryError extends Error {}

const FIELD_ROOTS = new Set([
  "id",
  "name",
  "acronym",
  "description",
  "studyIds",
  "networkIds",
  "published",
  "revisionStatus",
  "revisionsAhead",
  "lastModifiedDate",
  "model",
]);

function fail(call: RqlCall, message: string): never {
  throw new RqlQueryError(`${message} (${call.op} at position ${call.at})`);
}

function fieldArg(call: RqlCall, arg: RqlArg | undefined): string {
  if (typeof arg !== "string" || arg === "") fail(call, "Expected a field name");
  if (!FIELD_ROOTS.has(arg.split(".")[0]!)) fail(call, `Unknown field "${excerpt(arg)}"`);
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

/** The text of a `like` pattern or a `match` text, within the length a pattern may have. */
function patternArg(call: RqlCall, arg: RqlArg | undefined): string {
  const text = String(scalarArg(call, arg));
  if (text.length > MAX_PATTERN_CHARS) fail(call, `Pattern is ${text.length} characters long; at most ${MAX_PATTERN_CHARS} are accepted`);
  return text;
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
  const matches = globMatcher(term.endsWith("*") ? term : `${term}*`);
  return (sorted) => sorted.some(matches);
}

/** The same word rule answered by the inverted index: the ids that have such a word. */
function wordIds(words: WordIndex, term: string): ReadonlySet<string> {
  const stem = term.replace(/\*+$/, "");
  if (!stem.includes("*")) return words.withPrefix(stem);
  return words.matching(literalPrefix(stem), globMatcher(term.endsWith("*") ? term : `${term}*`));
}

/**
 * A compiled (sub)query. `ids`, when set, holds every id that may match (a superset, or exactly the
 * matches when `exact`); undefined means only visiting every entry can tell. An exact node's `test`
 * is a set lookup, so enclosing `not`/`and`/`or` never re-derive what the index already answered.
 */
interface Node {
  readonly test: EntryPredicate;
  readonly ids?: ReadonlySet<string>;
  readonly exact: boolean;
}

const scan = (test: EntryPredicate): Node => ({ test, exact: false });

function indexed(ids: ReadonlySet<string>): Node {
  return { test: (e) => ids.has(e.id), ids, exact: true };
}

function intersection(sets: readonly ReadonlySet<string>[]): ReadonlySet<string> {
  const [smallest, ...others] = [...sets].sort((a, b) => a.size - b.size);
  if (others.length === 0) return smallest!;
  const out = new Set<string>();
  for (const id of smallest!) if (others.every((s) => s.has(id))) out.add(id);
  return out;
}

function union(sets: readonly ReadonlySet<string>[]): ReadonlySet<string> {
  if (sets.length === 1) return sets[0]!;
  const out = new Set<string>();
  for (const s of sets) for (const id of s) out.add(id);
  return out;
}

function matchNode(call: RqlCall, index: QueryIndex | undefined): Node {
  arity(call, 1, 2);
  const field = call.args.length === 2 ? fieldArg(call, call.args[0]) : undefined;
  const text = patternArg(call, call.args[call.args.length - 1]);
  const terms = fold(text)
    .split(/[^\p{L}\p{N}*]+/u)
    .filter((t) => t.replace(/\*/g, "") !== "");
  if (terms.length === 0) fail(call, "Expected words to match");
  if (field === undefined && index) return indexed(intersection(terms.map((t) => wordIds(index.words, t))));
  const matchers = terms.map(wordMatcher);
  if (field === undefined) return scan((e) => matchers.every((m) => m(e.words)));
  return scan((e) => {
    const sorted = [...new Set(foldedWords(e, field))].sort();
    return matchers.every((m) => m(sorted));
  });
}

function compileCall(call: RqlCall, index: QueryIndex | undefined): Node {
  switch (call.op) {
    case "and":
    case "or": {
      const parts = call.args.map((a) => {
        if (!isCall(a)) fail(call, "Expected queries as arguments");
        return compileCall(a, index);
      });
      const tests = parts.map((p) => p.test);
      if (call.op === "and") {
        const test: EntryPredicate = (e) => tests.every((t) => t(e));
        const narrowing = parts.flatMap((p) => (p.ids ? [p.ids] : []));
        if (narrowing.length === 0) return scan(test);
        const ids = intersection(narrowing);
        return parts.every((p) => p.exact) ? indexed(ids) : { test, ids, exact: false };
      }
      const test: EntryPredicate = (e) => tests.some((t) => t(e));
      // One part that only a scan can answer makes the whole disjunction a scan.
      if (!parts.every((p) => p.ids)) return scan(test);
      const ids = union(parts.map((p) => p.ids!));
      return parts.every((p) => p.exact) ? indexed(ids) : { test, ids, exact: false };
    }
    case "not": {
      arity(call, 1, 1);
      const inner = call.args[0]!;
      if (!isCall(inner)) fail(call, "Expected a query as argument");
      const p = compileCall(inner, index).test;
      return scan((e) => !p(e));
    }
    // eq/ne are in/out of a single value.
    case "eq":
    case "ne":
    case "in":
    case "out": {
      arity(call, 2, 2);
      const field = fieldArg(call, call.args[0]);
      const values = call.op === "eq" || call.op === "ne" ? [scalarArg(call, call.args[1])] : listArg(call, call.args[1]);
      const hit: Node = index
        ? indexed(index.fields.withValues(field, values.map(String)))
        : scan((e) => valuesAt(e, field).some((v) => values.some((w) => same(v, w))));
      return call.op === "eq" || call.op === "in" ? hit : scan((e) => !hit.test(e));
    }
    case "lt":
    case "le":
    case "gt":
    case "ge": {
      arity(call, 2, 2);
      const field = fieldArg(call, call.args[0]);
      const value = scalarArg(call, call.args[1]);
      const accept = { lt: (c: number) => c < 0, le: (c: number) => c <= 0, gt: (c: number) => c > 0, ge: (c: number) => c >= 0 }[call.op];
      const test: EntryPredicate = (e) => valuesAt(e, field).some((v) => accept(order(v, value)));
      if (!index) return scan(test);
      // The index keeps values as text, which hides whether `5` was a number: a value is a candidate
      // when it passes as text or as a number, and the entry test settles which comparison applies.
      const candidate = (k: string) => accept(order(k, value)) || (typeof value === "number" && accept(Number(k) - value));
      return { test, ids: index.fields.withValueKeys(field, candidate), exact: false };
    }
    case "like": {
      arity(call, 2, 2);
      const field = fieldArg(call, call.args[0]);
      const pattern = fold(patternArg(call, call.args[1]));
      const matches = globMatcher(pattern);
      // A literal prefix (`heal*`) reads one key range of the sorted values; `*x*` reads them all,
      // which is still one test per distinct value rather than per network.
      if (index) return indexed(index.fields.withFolded(field, literalPrefix(pattern), matches));
      return scan((e) => foldedValuesAt(e, field).some(matches));
    }
    case "exists": {
      arity(call, 1, 2);
      const field = fieldArg(call, call.args[0]);
      const wanted = call.args.length === 2 ? scalarArg(call, call.args[1]) !== false : true;
      if (index) {
        const present = indexed(index.fields.withAnyValue(field));
        return wanted ? present : scan((e) => !present.test(e));
      }
      return scan((e) => valuesAt(e, field).length > 0 === wanted);
    }
    case "match":
      return matchNode(call, index);
    default:
      return fail(call, `Unknown operator "${excerpt(call.op)}"`);
  }
}

/** What a query can look up instead of visiting entries; it must index exactly the entries queried. */
export interface QueryIndex {
  readonly words: WordIndex;
  readonly fields: FieldIndex;
}

export interface CompiledQuery {
  readonly test: EntryPredicate;
  /** Every id that may match (exactly the matches when `exact`), or undefined when all must be tested. */
  readonly candidates?: ReadonlySet<string>;
  readonly exact: boolean;
}

/**
 * Without `index` the query is a predicate to run on every entry (the reference semantics). With it,
 * lookups answer what they can at compile time; the sets answered stay valid only until the indexed
 * entries change, so a compiled query must be run before any write is applied (list() is synchronous).
 */
export function compileQuery(query: RqlCall, index?: QueryIndex): CompiledQuery {
  const node = compileCall(query, index);
  return { test: node.test, ...(node.ids ? { candidates: node.ids } : {}), exact: node.exact };
}
