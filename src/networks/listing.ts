import { Code, ConnectError } from "@connectrpc/connect";
import type { NetworkRecord } from "./model.js";
import { parseRql, RqlSyntaxError } from "./rql.js";
import type { IndexEntry } from "./search-entry.js";
import { compileQuery, RqlQueryError, type EntryPredicate } from "./search-query.js";
import { fold } from "./text.js";
import type { WordIndex } from "./word-index.js";

/** List parameters of the contract and reference §2.5, validated once into a plan. */

export const LIST_FILTERS = ["ALL", "PUBLISHED", "UNDER_REVIEW", "IN_EDITION", "TO_DELETE"] as const;
export type ListFilter = (typeof LIST_FILTERS)[number];

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

export interface Indexed {
  readonly record: NetworkRecord;
  readonly entry: IndexEntry;
}

type SortKey = (item: Indexed) => string | undefined;

export interface ListPlan {
  readonly accept: (item: Indexed) => boolean;
  /** Names the order (`<sort>|<asc or desc>`), so that sorted lists can be reused between queries. */
  readonly orderName: string;
  readonly sortKey: SortKey;
  readonly descending: boolean;
  readonly from: number;
  readonly limit?: number;
}

function invalid(message: string): never {
  throw new ConnectError(message, Code.InvalidArgument);
}

const FILTERS: Record<ListFilter, (r: NetworkRecord) => boolean> = {
  ALL: () => true,
  PUBLISHED: (r) => r.state.publishedTag !== undefined,
  UNDER_REVIEW: (r) => r.state.revisionStatus === "UNDER_REVIEW",
  IN_EDITION: (r) => r.state.publishedTag !== undefined && r.state.revisionsAhead > 0,
  TO_DELETE: (r) => r.state.revisionStatus === "DELETED",
};

function sortKeyOf(sort: string): SortKey {
  if (sort === "id") return (i) => i.record.document.id;
  if (sort === "lastModifiedDate") return (i) => i.record.state.lastUpdate;
  const localized = /^(name|acronym)\.(.+)$/.exec(sort);
  if (!localized) invalid(`sort must be id, name.<lang>, acronym.<lang> or lastModifiedDate, not "${sort}"`);
  const [, field, lang] = localized as unknown as [string, "name" | "acronym", string];
  return (i) => {
    const value = i.record.document[field].find((l) => l.lang === lang)?.value;
    return value === undefined ? undefined : fold(value);
  };
}

export function compileRql(query: string, words?: WordIndex): EntryPredicate {
  try {
    return compileQuery(parseRql(query), words);
  } catch (e) {
    if (e instanceof RqlSyntaxError || e instanceof RqlQueryError) invalid(`Invalid query: ${e.message}`);
    throw e;
  }
}

/** `words` indexes exactly the entries the plan will be run on (see compileQuery). */
export function planList(params: ListParams, words?: WordIndex): ListPlan {
  const filterName = params.filter ?? "ALL";
  if (!(LIST_FILTERS as readonly string[]).includes(filterName)) invalid(`filter must be one of ${LIST_FILTERS.join(", ")}`);
  const order = (params.order ?? "asc").toLowerCase();
  if (order !== "asc" && order !== "desc") invalid(`order must be asc or desc, not "${params.order}"`);
  if (params.limit !== undefined && params.limit < 0) invalid("limit must not be negative");
  if (params.from !== undefined && params.from < 0) invalid("from must not be negative");
  const byState = FILTERS[filterName as ListFilter];
  const excluded = new Set((params.exclude ?? []).flatMap((e) => e.split(",")).map((e) => e.trim()).filter((e) => e !== ""));
  const study = params.study;
  const query = params.query?.trim() ? compileRql(params.query, words) : undefined;
  const sort = params.sort ?? "id";
  return {
    accept: (item) =>
      !excluded.has(item.record.document.id) &&
      byState(item.record) &&
      (study === undefined || item.record.document.studyIds.includes(study)) &&
      (query === undefined || query(item.entry)),
    orderName: `${sort}|${order}`,
    sortKey: sortKeyOf(sort),
    descending: order === "desc",
    from: params.from ?? 0,
    ...(params.limit !== undefined ? { limit: params.limit } : {}),
  };
}

export interface ListResult {
  readonly page: readonly NetworkRecord[];
  readonly total: number;
}

/** Documents without a value for the sort key come last in both orders; ties go by id. */
export function sortItems(items: Iterable<Indexed>, plan: ListPlan): Indexed[] {
  const keyed = [...items].map((item) => ({ key: plan.sortKey(item), id: item.record.document.id, item }));
  const sign = plan.descending ? -1 : 1;
  keyed.sort((a, b) => {
    if (a.key !== b.key) {
      if (a.key === undefined) return 1;
      if (b.key === undefined) return -1;
      return a.key < b.key ? -sign : sign;
    }
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
  return keyed.map((k) => k.item);
}

/** `sorted` must be in the plan's order (sortItems). */
export function runList(plan: ListPlan, sorted: readonly Indexed[]): ListResult {
  const end = plan.limit === undefined ? Infinity : plan.from + plan.limit;
  const page: NetworkRecord[] = [];
  let total = 0;
  for (const item of sorted) {
    if (!plan.accept(item)) continue;
    if (total >= plan.from && total < end) page.push(item.record);
    total++;
  }
  return { page, total };
}
