import { FieldIndex } from "./field-index.js";
import type { NetworkRecord } from "./model.js";
import type { IndexEntry } from "./search-entry.js";
import { fold } from "./text.js";
import { WordIndex } from "./word-index.js";

/** A committed network as the mirror holds it: its record and the index entry derived from it. */
export interface Indexed {
  readonly record: NetworkRecord;
  readonly entry: IndexEntry;
}

export const LIST_FILTERS = ["ALL", "PUBLISHED", "UNDER_REVIEW", "IN_EDITION", "TO_DELETE"] as const;
export type ListFilter = (typeof LIST_FILTERS)[number];

/** Reference §2.3: the list filters overlap; ALL is no filter. */
const FILTERS: Record<Exclude<ListFilter, "ALL">, (r: NetworkRecord) => boolean> = {
  PUBLISHED: (r) => r.state.publishedTag !== undefined,
  UNDER_REVIEW: (r) => r.state.revisionStatus === "UNDER_REVIEW",
  IN_EDITION: (r) => r.state.publishedTag !== undefined && r.state.revisionsAhead > 0,
  TO_DELETE: (r) => r.state.revisionStatus === "DELETED",
};
const FILTER_NAMES = Object.keys(FILTERS) as (keyof typeof FILTERS)[];

export type SortKey = (record: NetworkRecord) => string | undefined;

/** The sort key of `sort`, or undefined when `sort` is not one of reference §2.5. */
export function sortKeyOf(sort: string): SortKey | undefined {
  if (sort === "id") return (r) => r.document.id;
  if (sort === "lastModifiedDate") return (r) => r.state.lastUpdate;
  const localized = /^(name|acronym)\.(.+)$/.exec(sort);
  if (!localized) return undefined;
  const field = localized[1] as "name" | "acronym";
  const lang = localized[2]!;
  return (r) => {
    const value = r.document[field].find((l) => l.lang === lang)?.value;
    return value === undefined ? undefined : fold(value);
  };
}

interface Slot {
  readonly key: string | undefined;
  readonly id: string;
}

/**
 * Every network's id in one list order, kept sorted across writes by binary removal and insertion
 * (a write costs two splices, not a re-sort at the next list). Documents without a value for the
 * key come last in both directions; ties go by id.
 */
export class SortedOrder {
  private readonly slots: Slot[];

  constructor(
    private readonly keyOf: SortKey,
    private readonly descending: boolean,
    records: Iterable<NetworkRecord>,
  ) {
    this.slots = [...records].map((r) => this.slotOf(r)).sort((a, b) => this.compare(a, b));
  }

  private slotOf(record: NetworkRecord): Slot {
    return { key: this.keyOf(record), id: record.document.id };
  }

  compare(a: Slot, b: Slot): number {
    if (a.key !== b.key) {
      if (a.key === undefined) return 1;
      if (b.key === undefined) return -1;
      return (a.key < b.key ? -1 : 1) * (this.descending ? -1 : 1);
    }
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  }

  private position(slot: Slot): number {
    let lo = 0;
    let hi = this.slots.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.compare(this.slots[mid]!, slot) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  add(record: NetworkRecord): void {
    const slot = this.slotOf(record);
    this.slots.splice(this.position(slot), 0, slot);
  }

  /** `record` must be the one that was added: its key locates the slot. */
  remove(record: NetworkRecord): void {
    const i = this.position(this.slotOf(record));
    if (this.slots[i]?.id === record.document.id) this.slots.splice(i, 1);
  }

  /** Ids in order. */
  *ids(): Generator<string> {
    for (const s of this.slots) yield s.id;
  }

}

// Each distinct sort (per language, per direction) keeps a whole order; a bound keeps callers from
// growing them without limit with made-up languages. The least recently used one goes first.
const MAX_ORDERS = 16;

/**
 * Everything the list looks up instead of visiting every network: full-text words, field values,
 * the list filters, studies and list orders. It is derived from the mirror only (never stored), is
 * updated with it on each committed change, and can be rebuilt from it at any time.
 */
export class CatalogIndex {
  readonly words = new WordIndex();
  readonly fields: FieldIndex;
  private readonly filters = new Map<ListFilter, Set<string>>(FILTER_NAMES.map((f) => [f, new Set<string>()]));
  private readonly studies = new Map<string, Set<string>>();
  private readonly orders = new Map<string, SortedOrder>();

  constructor(private readonly mirror: ReadonlyMap<string, Indexed>) {
    this.fields = new FieldIndex((id) => mirror.get(id)?.entry);
  }

  add({ record, entry }: Indexed): void {
    const id = record.document.id;
    this.words.add(id, entry.words);
    this.fields.add(entry);
    for (const f of FILTER_NAMES) if (FILTERS[f](record)) this.filters.get(f)!.add(id);
    for (const s of record.document.studyIds) {
      let set = this.studies.get(s);
      if (!set) this.studies.set(s, (set = new Set()));
      set.add(id);
    }
    for (const order of this.orders.values()) order.add(record);
  }

  /** `item` must be the very item that was added for its id. */
  remove({ record, entry }: Indexed): void {
    const id = record.document.id;
    this.words.remove(id, entry.words);
    this.fields.remove(entry);
    for (const set of this.filters.values()) set.delete(id);
    for (const s of record.document.studyIds) {
      const set = this.studies.get(s);
      set?.delete(id);
      if (set?.size === 0) this.studies.delete(s);
    }
    for (const order of this.orders.values()) order.remove(record);
  }

  /** Forgets everything and indexes the mirror afresh. */
  rebuild(): void {
    this.words.clear();
    this.fields.clear();
    for (const set of this.filters.values()) set.clear();
    this.studies.clear();
    this.orders.clear();
    for (const item of this.mirror.values()) this.add(item);
  }

  /** Ids passing a list filter; undefined for ALL. */
  filtered(filter: ListFilter): ReadonlySet<string> | undefined {
    return filter === "ALL" ? undefined : this.filters.get(filter)!;
  }

  /** Ids of the networks listing `study`. */
  withStudy(study: string): ReadonlySet<string> {
    return this.studies.get(study) ?? new Set();
  }

  /** The maintained order for a sort (validated by the caller), created at its first use. */
  order(sort: string, descending: boolean): SortedOrder {
    const name = `${sort}|${descending ? "desc" : "asc"}`;
    let order = this.orders.get(name);
    if (order) {
      this.orders.delete(name);
    } else {
      order = new SortedOrder(sortKeyOf(sort)!, descending, [...this.mirror.values()].map((i) => i.record));
      if (this.orders.size >= MAX_ORDERS) this.orders.delete(this.orders.keys().next().value!);
    }
    this.orders.set(name, order);
    return order;
  }
}
