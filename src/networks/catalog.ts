import { Fault } from "../errors/fault.js";
import { diffDocuments } from "./diff.js";
import { normalizeDocument, storedJson } from "./document.js";
import { acronymFromName, baseId, firstFreeId, isValidId } from "./ids.js";
import { KeyedMutex } from "./keyed-mutex.js";
import { excerpt, MAX_COMMENT_CHARS } from "./limits.js";
import { CatalogIndex, type Indexed } from "./search/catalog-index.js";
import { planList, runList, type ListParams, type ListResult } from "./search/listing.js";
import type { JsonObject, NetworkDocument, NetworkInput, NetworkRecord, NetworkState, RevisionRecord, RevisionStatus } from "./model.js";
import { indexEntryOf } from "./search/search-entry.js";
import { dayStart, issueShareKey, shareKeyGrants } from "./share-key.js";
import * as machine from "./state-machine.js";
import { NetworkStore, revisionJson } from "./store.js";

export interface CatalogOptions {
  /** The clock; tests move it to expire share keys. */
  readonly now?: () => Date;
}

/** A revision as listed: its record plus where it stands against head and publication. */
export interface RevisionInfo {
  readonly revision: RevisionRecord;
  readonly commitId: string;
  readonly isHead: boolean;
  readonly isPublished: boolean;
}

function notFound(id: string): never {
  throw new Fault("not_found", `No such network: ${excerpt(id)}`);
}

/**
 * The draft network catalogue. LevelDB is the source of truth; an in-memory mirror of documents,
 * states and index entries (loaded from LevelDB at open, updated after each committed batch) answers
 * reads and queries. Writes to one network are serialized in this process.
 */
export class NetworkCatalog {
  private readonly mirror = new Map<string, Indexed>();
  /** Ids handed out to creations that are not committed yet, so two creations never share one. */
  private readonly reserved = new Set<string>();
  private readonly locks = new KeyedMutex();
  /** Lookups for listing and search, changed together with the mirror and only with it. */
  private readonly index = new CatalogIndex(this.mirror);

  private constructor(
    private readonly store: NetworkStore,
    private readonly secret: Buffer,
    private readonly clock: () => Date,
  ) {}

  static async open(dir: string, options: CatalogOptions = {}): Promise<NetworkCatalog> {
    const store = await NetworkStore.open(dir);
    try {
      const catalog = new NetworkCatalog(store, await store.secret(), options.now ?? (() => new Date()));
      const missing: Indexed[] = [];
      for (const { record, entry } of await store.loadAll()) {
        const item = { record, entry: entry ?? indexEntryOf(record) };
        catalog.show(item);
        if (!entry) missing.push(item);
      }
      if (missing.length > 0) await store.saveEntries(missing.map((m) => m.entry));
      catalog.index.flush();
      return catalog;
    } catch (e) {
      await store.close();
      throw e;
    }
  }

  close(): Promise<void> {
    return this.store.close();
  }

  /** Puts a committed network in the mirror and tells the index (in place of its previous version). */
  private show(item: Indexed): void {
    const id = item.record.document.id;
    const before = this.mirror.get(id);
    this.mirror.set(id, item);
    this.index.changed(before, item);
  }

  private hide(id: string): void {
    const old = this.mirror.get(id);
    if (!old) return;
    this.mirror.delete(id);
    this.index.changed(old, undefined);
  }

  private now(): string {
    return this.clock().toISOString();
  }

  get size(): number {
    return this.mirror.size;
  }

  has(id: string): boolean {
    return this.mirror.has(id);
  }

  get(id: string): NetworkRecord {
    return this.mirror.get(id)?.record ?? notFound(id);
  }

  /**
   * Commits one change of a network (one batch) and only then shows it in the mirror. `before` is the
   * committed version it replaces (absent for a creation); a save (`author` given) adds revision
   * `state.head`. The document is stringified once, for itself and its revision, and only when it
   * is not the document of `before`.
   */
  private async commit(before: Indexed | undefined, record: NetworkRecord, author?: string, comment?: string): Promise<NetworkRecord> {
    const { document, state } = record;
    if (comment !== undefined && comment.length > MAX_COMMENT_CHARS) {
      throw new Fault("invalid", `comment is ${comment.length} characters long; at most ${MAX_COMMENT_CHARS} are accepted`);
    }
    // Checked before indexing, which recurses into the model as deep as it goes.
    const documentJson = before?.record.document === document ? undefined : storedJson(document);
    const entry = indexEntryOf(record, before);
    const revision =
      author === undefined
        ? undefined
        : { seq: state.head, json: revisionJson(state.head, author, state.lastUpdate, comment, documentJson ?? JSON.stringify(document)) };
    const written = this.store.save({ id: document.id, documentJson, state, entry, revision });
    // Index work of earlier commits, done while LevelDB writes this one (see CatalogIndex).
    this.index.flush();
    await written;
    this.show({ record, entry });
    return record;
  }

  private taken(id: string): boolean {
    return this.mirror.has(id) || this.reserved.has(id);
  }

  private claimId(input: NetworkInput): string {
    if (input.id) {
      if (!isValidId(input.id)) throw new Fault("invalid", `Invalid network id: ${JSON.stringify(excerpt(input.id))}`);
      if (this.taken(input.id)) throw new Fault("conflict", `Network already exists: ${input.id}`);
      return input.id;
    }
    const name = normalizeDocument(input, "").name;
    const acronym = input.acronym?.some((a) => a.value !== "") ? input.acronym : acronymFromName(name);
    const base = baseId([...acronym].filter((a) => a.value !== "").sort((a, b) => (a.lang < b.lang ? -1 : a.lang > b.lang ? 1 : 0)));
    if (base === "") throw new Fault("invalid", "Cannot derive an id from the acronym or name");
    return firstFreeId(base, (id) => this.taken(id));
  }

  async create(input: NetworkInput, author: string, comment?: string): Promise<NetworkRecord> {
    const id = this.claimId(input);
    this.reserved.add(id);
    try {
      const document = normalizeDocument(input, id);
      const state = machine.created(this.now());
      return await this.locks.run(id, () => this.commit(undefined, { document, state }, author, comment));
    } finally {
      this.reserved.delete(id);
    }
  }

  /** Runs `change` on the current (committed) version of `id` while no other change of it runs. */
  private change<T>(id: string, change: (current: Indexed) => Promise<T>): Promise<T> {
    if (!this.mirror.has(id)) notFound(id);
    return this.locks.run(id, () => change(this.mirror.get(id) ?? notFound(id)));
  }

  private saveDocument(current: Indexed, document: NetworkDocument, author: string, comment?: string): Promise<NetworkRecord> {
    return this.commit(current, { document, state: machine.saved(current.record.state, this.now()) }, author, comment);
  }

  /** A change of the state alone: the document, and what the index derives from it, stay as they are. */
  private changeState(id: string, next: (state: NetworkState) => NetworkState): Promise<NetworkRecord> {
    return this.change(id, (current) => this.commit(current, { document: current.record.document, state: next(current.record.state) }));
  }

  /** Full replacement; the path id wins and a different body id is refused. */
  update(id: string, input: NetworkInput, author: string, comment?: string): Promise<NetworkRecord> {
    if (input.id && input.id !== id) {
      throw new Fault("invalid", `Body id ${excerpt(input.id)} differs from path id ${excerpt(id)}`);
    }
    const document = normalizeDocument(input, id);
    return this.change(id, (current) => this.saveDocument(current, document, author, comment));
  }

  updateModel(id: string, model: JsonObject, author: string, comment?: string): Promise<NetworkRecord> {
    return this.change(id, (current) => this.saveDocument(current, { ...current.record.document, model }, author, comment));
  }

  setStatus(id: string, status: RevisionStatus): Promise<NetworkRecord> {
    return this.changeState(id, (state) => machine.statusSet(state, status));
  }

  publish(id: string, by: string): Promise<NetworkRecord> {
    return this.changeState(id, (state) => machine.published(state, this.now(), by));
  }

  unpublish(id: string): Promise<NetworkRecord> {
    return this.changeState(id, (state) => machine.unpublished(state));
  }

  /** Refused while another network includes this one (409 `{"network":[ids]}`). */
  delete(id: string): Promise<void> {
    return this.change(id, async () => {
      const referrers = [...this.index.fields.withValues("networkIds", [id])].filter((other) => other !== id).sort();
      if (referrers.length > 0) {
        throw new Fault("conflict", `Network ${id} is included in: ${referrers.join(", ")}`, { body: { network: referrers } });
      }
      await this.store.remove(id);
      this.hide(id);
    });
  }

  /** Newest first. */
  async revisions(id: string): Promise<RevisionInfo[]> {
    const { state } = this.get(id);
    const list = await this.store.revisions(id);
    return list.reverse().map((revision) => ({
      revision,
      commitId: String(revision.seq),
      isHead: revision.seq === state.head,
      isPublished: state.publishedTag !== undefined && String(revision.seq) === state.publishedId,
    }));
  }

  async revision(id: string, commitId: string): Promise<RevisionRecord> {
    this.get(id);
    const seq = /^[1-9][0-9]{0,9}$/.test(commitId) ? Number(commitId) : undefined;
    const revision = seq === undefined ? undefined : await this.store.revision(id, seq);
    if (!revision) throw new Fault("not_found", `No such revision of network ${id}: ${excerpt(commitId)}`);
    return revision;
  }

  /** Saves the document of an earlier revision as a new revision. */
  async restore(id: string, commitId: string, author: string, comment?: string): Promise<NetworkRecord> {
    const { document } = await this.revision(id, commitId);
    return this.change(id, (current) => this.saveDocument(current, document, author, comment ?? `Restored revision ${commitId}`));
  }

  async diff(id: string, left: string, right: string): Promise<JsonObject> {
    const [l, r] = await Promise.all([this.revision(id, left), this.revision(id, right)]);
    return diffDocuments(l.document, r.document);
  }

  /** Synchronous on purpose: the index sets a query looks up cannot change while it runs. */
  list(params: ListParams): ListResult {
    return runList(planList(params), this.mirror, this.index);
  }

  /** Recomputes the index entry of one network from its stored document and state. */
  indexNetwork(id: string): Promise<void> {
    return this.change(id, async () => {
      const record = await this.store.storedRecord(id);
      if (!record) notFound(id);
      const entry = indexEntryOf(record);
      await this.store.saveEntries([entry]);
      this.show({ record, entry });
    });
  }

  /**
   * Recomputes every stored index entry from its document, then rebuilds the in-memory lookups from
   * the mirror in one synchronous step, so that nothing derived from an earlier state survives.
   */
  async rebuildIndex(): Promise<void> {
    for (const id of [...this.mirror.keys()]) {
      // A network deleted while the rebuild runs has nothing left to index.
      await this.indexNetwork(id).catch((e: unknown) => {
        if (!(e instanceof Fault && e.kind === "not_found")) throw e;
      });
    }
    this.index.rebuild();
  }

  shareKey(id: string, expire: string): string {
    this.get(id);
    const start = dayStart(expire);
    if (start === undefined) throw new Fault("invalid", "expire must be a day as YYYY-MM-DD");
    if (start <= this.clock().getTime()) throw new Fault("invalid", "expire must be a day that has not begun");
    return issueShareKey(this.secret, id, expire);
  }

  shareKeyGrants(key: string, id: string): boolean {
    return shareKeyGrants(this.secret, key, id, this.clock().getTime());
  }

  /** The stored index entry of a network, read from LevelDB (for consistency checks). */
  storedEntry(id: string) {
    return this.store.storedEntry(id);
  }
}
