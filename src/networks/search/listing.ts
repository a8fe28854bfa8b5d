import { Fault } from "../../errors/fault.js";
import { LIST_FILTERS, SortedOrder, sortKeyOf, type CatalogIndex, type Indexed, type ListFilter } from "./catalog-index.js";
import { excerpt, MAX_EXCLUDED_IDS, MAX_QUERY_CHARS } from "../limits.js";
import type { NetworkRecord } from "../model.js";
import { parseRql, RqlSyntaxError, type RqlCall } from "./rql.js";
import { compileQuery, RqlQueryError, type CompiledQuery, type QueryIndex } from "./search-query.js";

export { LIST_FILTERS, type Indexed, type ListFilter } from "./catalog-index.js";

/** List parameters of the contract and reference §2.5, validated once into a plan. */

export interface ListParams {
  readonly study?: string;
  readonly query?: string;
  readonly from?: number;
  readonly limit?: number;
  readonly sort?: string;
  readonly order?: string;
  readonly exclude?: readonly string[];
  readonly filter?: string;
}

export interface ListPlan {
  readonly filter: ListFilter;
  readonly excluded: ReadonlySet<string>;
  readonly study?: string;
  /** Parsed only: it is compiled against the index when the list runs. */
  readonly query?: RqlCall;
  readonly sort: string;
  readonly descending: boolean;
  readonly from: number;
  readonly limit?: number;
}

function invalid(message: string): never {
  throw new Fault("invalid", message);
}

function parseQuery(query: string): RqlCall {
  if (query.length > MAX_QUERY_CHARS) invalid(`query is ${query.length} characters long; at most ${MAX_QUERY_CHARS} are accepted`);
  try {
    return parseRql(query);
  } catch (e) {
    if (e instanceof RqlSyntaxError) invalid(`Invalid query: ${e.message}`);
    throw e;
  }
}

function compile(query: RqlCall, index: QueryIndex): CompiledQuery {
  try {
    return compileQuery(query, index);
  } catch (e) {
    if (e instanceof RqlQueryError) invalid(`Invalid query: ${e.message}`);
    throw e;
  }
}

/** `exclude` may be repeated or comma separated (reference §2.5). */
function excludedIds(exclude: readonly string[]): ReadonlySet<string> {
  const ids = new Set<string>();
  for (const item of exclude) {
    for (const part of item.split(",")) {
      const id = part.trim();
      if (id === "") continue;
      ids.add(id);
      if (ids.size > MAX_EXCLUDED_IDS) invalid(`exclude names more than ${MAX_EXCLUDED_IDS} ids`);
    }
  }
  return ids;
}

export function planList(params: ListParams): ListPlan {
  const filter = params.filter ?? "ALL";
  if (!(LIST_FILTERS as readonly string[]).includes(filter)) invalid(`filter must be one of ${LIST_FILTERS.join(", ")}`);
  const order = (params.order ?? "asc").toLowerCase();
  if (order !== "asc" && order !== "desc") invalid(`order must be asc or desc, not "${excerpt(params.order ?? "")}"`);
  if (params.limit !== undefined && params.limit < 0) invalid("limit must not be negative");
  if (params.from !== undefined && params.from < 0) invalid("from must not be negative");
  const sort = params.sort ?? "id";
  if (!sortKeyOf(sort)) invalid(`sort must be id, name.<lang>, acronym.<lang> or lastModifiedDate, not "${excerpt(sort)}"`);
  return {
    filter: filter as ListFilter,
    excluded: excludedIds(params.exclude ?? []),
    ...(params.study !== undefined ? { study: params.study } : {}),
    ...(params.query?.trim() ? { query: parseQuery(params.query) } : {}),
    sort,
    descending: order === "desc",
    from: params.from ?? 0,
    ...(params.limit !== undefined ? { limit: params.limit } : {}),
  };
}

export interface ListResult {
  readonly page: readonly NetworkRecord[];
  readonly total: number;
}

// Up to this many matches are sorted on their own; more are read off the maintained order, which
// costs one set lookup per network passed (and stops once the page is full).
const SORT_ALONE = 64;

/**
 * Runs a plan over the mirror with the index kept in step with it. Candidates come from the most
 * selective of the filter set, the study set and the query's lookups; only what the lookups could
 * not answer is tested per entry, and only the page's records are handed out.
 */
export function runList(plan: ListPlan, mirror: ReadonlyMap<string, Indexed>, index: CatalogIndex): ListResult {
  const query = plan.query ? compile(plan.query, index) : undefined;
  const required: ReadonlySet<string>[] = [];
  const filtered = index.filtered(plan.filter);
  if (filtered) required.push(filtered);
  if (plan.study !== undefined) required.push(index.withStudy(plan.study));
  if (query?.candidates) required.push(query.candidates);
  const test = query && !query.exact ? query.test : undefined;
  const end = plan.limit === undefined ? Infinity : plan.from + plan.limit;

  if (required.length === 0 && !test) {
    // Nothing selects: the order itself is the list, less the exclusions.
    let excludedPresent = 0;
    for (const id of plan.excluded) if (mirror.has(id)) excludedPresent++;
    return { page: pageOf(plan, mirror, index, (id) => !plan.excluded.has(id), end), total: mirror.size - excludedPresent };
  }

  required.sort((a, b) => a.size - b.size);
  const [smallest, ...others] = required;
  let matches: ReadonlySet<string>;
  if (smallest && others.length === 0 && !test && plan.excluded.size === 0) {
    // One exact set answers the whole question: read it as is.
    matches = smallest;
  } else {
    const selected = new Set<string>();
    for (const id of smallest ?? mirror.keys()) {
      if (plan.excluded.has(id) || !others.every((s) => s.has(id))) continue;
      if (test && !test(mirror.get(id)!.entry)) continue;
      selected.add(id);
    }
    matches = selected;
  }
  if (matches.size <= SORT_ALONE) {
    // A throwaway order of the matches alone: the maintained one is neither needed nor created.
    const sorted = [
      ...new SortedOrder(
        sortKeyOf(plan.sort)!,
        plan.descending,
        [...matches].map((id) => mirror.get(id)!.record),
      ).ids(),
    ];
    return { page: sorted.slice(plan.from, end).map((id) => mirror.get(id)!.record), total: matches.size };
  }
  return { page: pageOf(plan, mirror, index, (id) => matches.has(id), end), total: matches.size };
}

function pageOf(
  plan: ListPlan,
  mirror: ReadonlyMap<string, Indexed>,
  index: CatalogIndex,
  accept: (id: string) => boolean,
  end: number,
): NetworkRecord[] {
  const page: NetworkRecord[] = [];
  if (end <= plan.from) return page;
  let seen = 0;
  for (const id of index.order(plan.sort, plan.descending).ids()) {
    if (!accept(id)) continue;
    if (seen >= plan.from) page.push(mirror.get(id)!.record);
    if (++seen >= end) break;
  }
  return page;
}
