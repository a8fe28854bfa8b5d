import { FieldIndex } from "./field-index.js";
import type { NetworkRecord } from "../model.js";
import type { IndexEntry } from "./search-entry.js";
import { SortedChunks } from "./sorted-keys.js";
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
 * Every network's id in one list order, kept sorted across writes by insertion and removal (a write
 * costs a removal and an insertion in one chunk, not a re-sort at the next list). Documents without
 * a value for the key come last in both directions; ties go by id.
 */
export class SortedOrder {
  private readonly slots: SortedChunks<Slot>;

  constructor(
    private readonly keyOf: SortKey,
    private readonly descending: boolean,
    records: Iterable<NetworkRecord>,
  ) {
    const sorted = [...records].map((r) => this.slotOf(r)).sort((a, b) => this.compare(a, b));
    this.slots = new SortedChunks((a, b) => this.compare(a, b), sorted);
  }

  private slotOf(record: NetworkRecord): Slot {
    return { key: this.keyOf(record), id: record.document.id };
  }

  private compare(a: Slot, b: Slot): number {
    if (a.key !== b.key) {
      if (a.key === undefined) return 1;
      if (b.key === undefined) return -1;
      return (a.key < b.key ? -1 : 1) * (this.descending ? -1 : 1);
    }
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  }

  add(record: NetworkRecord): void {
    this.slots.insert(this.slotOf(record));
  }

  /** `record` must be the one that was added: its key locates the slot. */
  remove(record: NetworkRecord): void {
    this.slots.remove(this.slotOf(record));
  }

  /** `before` (the record that was added) becomes `after` (same id): moved only if its key changed. */
  replace(before: NetworkRecord, after: NetworkRecord): void {
    const old = this.keyOf(before);
    const key = this.keyOf(after);
    if (key === old) return;
    const id = after.document.id;
    this.slots.remove({ key: old, id });
    this.slots.insert({ key, id });
  }

  /** Ids in order. */
  *ids(): Generator<string> {
    for (const s of this.slots.from()) yield s.id;
  }
}

// Each distinct sort (per language, per direction) keeps a whole order; a bound keeps callers from
// growing them without limit with made-up languages. The least recently used one goes first.
const MAX_ORDERS = 16;

function* entriesOf(mirror: ReadonlyMap<string, Indexed>): Generator<IndexEntry> {
  for (const item of mirror.values()) yield item.entry;
}

/** One committed change of the mirror for one id: absent `before` is a creation, absent `after` a removal. */
interface Change {
  readonly before: Indexed | undefined;
  readonly after: Indexed | undefined;
}

/**
 * Everything the list looks up instead of visiting every network: full-text words, field values
 * (studies among them), the list filters and list orders. It is derived from the mirror only (never
 * stored), is told of each committed change of the mirror, and can be rebuilt from it at any time.
 *
 * A change is applied at the latest before the index is next read: every read (the `words` and
 * `fields` lookups, filters, studies, orders) first applies what is pending, so a reader always sees
 * the index of the mirror as it is. Until then the change waits, so that the catalogue can apply it
 * while LevelDB writes the next change (`flush` after starting that write), or when the event loop
 * is next idle, rather than between a commit and its answer.
 */
export class CatalogIndex {
  private readonly wordIndex = new WordIndex();
  private readonly fieldIndex: FieldIndex;
  private readonly filters = new Map<ListFilter, Set<string>>(FILTER_NAMES.map((f) => [f, new Set<string>()]));
  private readonly orders = new Map<string, SortedOrder>();
  /** Committed changes not applied yet, oldest first. */
  private pending: Change[] = [];
  private flushScheduled = false;
  private readonly scheduledFlush = () => {
    this.flushScheduled = false;
    this.flush();
  };

  constructor(private readonly mirror: ReadonlyMap<string, Indexed>) {
    this.fieldIndex = new FieldIndex(() => entriesOf(mirror));
  }

  /** Full-text words (pending changes applied first). */
  get words(): WordIndex {
    this.flush();
    return this.wordIndex;
  }

  /** Field values (pending changes applied first). */
  get fields(): FieldIndex {
    this.flush();
    return this.fieldIndex;
  }

  /**
   * The mirror entry of one id went from `before` (the very item last given as `after` for that id,
   * or undefined) to `after` (undefined when removed). Applied at the latest at the next read.
   */
  changed(before: Indexed | undefined, after: Indexed | undefined): void {
    this.pending.push({ before, after });
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(this.scheduledFlush);
    }
  }

  /** Applies the pending changes, oldest first. */
  flush(): void {
    const pending = this.pending;
    if (pending.length === 0) return;
    this.pending = [];
    for (const { before, after } of pending) {
      if (after) this.replace(before, after);
      else if (before) this.remove(before);
    }
  }

  private add({ record, entry }: Indexed): void {
    const id = record.document.id;
    this.wordIndex.add(id, entry.words);
    this.fieldIndex.add(entry);
    for (const f of FILTER_NAMES) if (FILTERS[f](record)) this.filters.get(f)!.add(id);
    for (const order of this.orders.values()) order.add(record);
  }

  /** `item` must be the very item that was added for its id. */
  private remove({ record, entry }: Indexed): void {
    const id = record.document.id;
    this.wordIndex.remove(id, entry.words);
    this.fieldIndex.remove(entry);
    for (const f of FILTER_NAMES) if (FILTERS[f](record)) this.filters.get(f)!.delete(id);
    for (const order of this.orders.values()) order.remove(record);
  }

  /**
   * `before` (the very item that was added for its id) is replaced by `after`, a newer version of the
   * same network: what did not change is not touched (the words of an unchanged document, the values
   * of unchanged fields, the filters it stays in or out of, the orders whose key is the same).
   */
  private replace(before: Indexed | undefined, after: Indexed): void {
    if (!before) return this.add(after);
    const { record, entry } = after;
    const id = record.document.id;
    this.wordIndex.replace(id, before.entry.words, entry.words);
    this.fieldIndex.replace(before.entry, entry);
    for (const f of FILTER_NAMES) {
      const is = FILTERS[f](record);
      if (is === FILTERS[f](before.record)) continue;
      if (is) this.filters.get(f)!.add(id);
      else this.filters.get(f)!.delete(id);
    }
    for (const order of this.orders.values()) order.replace(before.record, record);
  }

  /** Forgets everything (pending changes included: the mirror has them) and indexes the mirror afresh. */
  rebuild(): void {
    this.pending = [];
    this.wordIndex.clear();
    this.fieldIndex.clear();
    for (const set of this.filters.values()) set.clear();
    this.orders.clear();
    for (const item of this.mirror.values()) this.add(item);
  }

  /** Ids passing a list filter; undefined for ALL. */
  filtered(filter: ListFilter): ReadonlySet<string> | undefined {
    this.flush();
    return filter === "ALL" ? undefined : this.filters.get(filter)!;
  }

  /** Ids of the networks listing `study`: the `studyIds` values of their entries are their studies. */
  withStudy(study: string): ReadonlySet<string> {
    return this.fields.withValues("studyIds", [study]);
  }

  /** The maintained order for a sort (validated by the caller), created at its first use. */
  order(sort: string, descending: boolean): SortedOrder {
    this.flush();
    const name = `${sort}|${descending ? "desc" : "asc"}`;
    let order = this.orders.get(name);
    if (order) {
      this.orders.delete(name);
    } else {
      order = new SortedOrder(
        sortKeyOf(sort)!,
        descending,
        [...this.mirror.values()].map((i) => i.record),
      );
      if (this.orders.size >= MAX_ORDERS) this.orders.delete(this.orders.keys().next().value!);
    }
    this.orders.set(name, order);
    return order;
  }
}
