import { randomBytes } from "node:crypto";
import { Level } from "level";
import type { NetworkDocument, NetworkRecord, NetworkState, RevisionRecord } from "./model.js";
import type { IndexEntry } from "./search-entry.js";

/**
 * LevelDB layout, one sublevel per kind: `doc` id → current document, `state` id → state,
 * `rev` id␀seq → revision, `idx` id → search index entry, `meta` → settings. Every change of a
 * network is one batch over these sublevels, so a crash leaves the old or the new network, never
 * a document whose state, history or index entry belongs to another version.
 */

const SEP = "\u0000";
const SEQ_WIDTH = 10;

function revKey(id: string, seq: number): string {
  return `${id}${SEP}${String(seq).padStart(SEQ_WIDTH, "0")}`;
}

export interface SaveOperation {
  readonly record: NetworkRecord;
  readonly entry: IndexEntry;
  /** Absent for changes that are not saves (status, publication). */
  readonly revision?: RevisionRecord;
}

export interface StoredNetwork {
  readonly record: NetworkRecord;
  /** Undefined only in a store written without index entries (then a rebuild is due). */
  readonly entry?: IndexEntry;
}

export class NetworkStore {
  private readonly docs;
  private readonly states;
  private readonly revs;
  private readonly idx;
  private readonly meta;

  private constructor(private readonly db: Level<string, string>) {
    this.docs = db.sublevel<string, NetworkDocument>("doc", { valueEncoding: "json" });
    this.states = db.sublevel<string, NetworkState>("state", { valueEncoding: "json" });
    this.revs = db.sublevel<string, RevisionRecord>("rev", { valueEncoding: "json" });
    this.idx = db.sublevel<string, IndexEntry>("idx", { valueEncoding: "json" });
    this.meta = db.sublevel<string, string>("meta", { valueEncoding: "utf8" });
  }

  static async open(dir: string): Promise<NetworkStore> {
    const db = new Level<string, string>(dir, { valueEncoding: "utf8" });
    await db.open();
    return new NetworkStore(db);
  }

  close(): Promise<void> {
    return this.db.close();
  }

  /** Every network with its stored index entry, read once at open to build the in-memory mirror. */
  async loadAll(): Promise<StoredNetwork[]> {
    const states = new Map(await this.states.iterator().all());
    const entries = new Map(await this.idx.iterator().all());
    const out: StoredNetwork[] = [];
    for await (const [id, document] of this.docs.iterator()) {
      const state = states.get(id);
      if (!state) throw new Error(`Network ${id} has a document but no state`);
      const entry = entries.get(id);
      out.push({ record: { document, state }, ...(entry ? { entry } : {}) });
    }
    return out;
  }

  async save(op: SaveOperation): Promise<void> {
    const id = op.record.document.id;
    const batch = this.db
      .batch()
      .put(id, op.record.document, { sublevel: this.docs })
      .put(id, op.record.state, { sublevel: this.states })
      .put(id, op.entry, { sublevel: this.idx });
    if (op.revision) batch.put(revKey(id, op.revision.seq), op.revision, { sublevel: this.revs });
    await batch.write();
  }

  async saveEntries(entries: readonly IndexEntry[]): Promise<void> {
    const batch = this.db.batch();
    for (const e of entries) batch.put(e.id, e, { sublevel: this.idx });
    await batch.write();
  }

  /** Removes a network and its whole history in one batch. */
  async remove(id: string): Promise<void> {
    const revKeys = await this.revs.keys({ gt: `${id}${SEP}`, lt: `${id}${SEP}\uffff` }).all();
    const batch = this.db
      .batch()
      .del(id, { sublevel: this.docs })
      .del(id, { sublevel: this.states })
      .del(id, { sublevel: this.idx });
    for (const key of revKeys) batch.del(key, { sublevel: this.revs });
    await batch.write();
  }

  /** Oldest first. */
  revisions(id: string): Promise<RevisionRecord[]> {
    return this.revs.values({ gt: `${id}${SEP}`, lt: `${id}${SEP}\uffff` }).all();
  }

  revision(id: string, seq: number): Promise<RevisionRecord | undefined> {
    return this.revs.get(revKey(id, seq));
  }

  /** The index entry as stored on disk, bypassing any mirror (for consistency checks). */
  storedEntry(id: string): Promise<IndexEntry | undefined> {
    return this.idx.get(id);
  }

  storedRecord(id: string): Promise<NetworkRecord | undefined> {
    return Promise.all([this.docs.get(id), this.states.get(id)]).then(([document, state]) =>
      document && state ? { document, state } : undefined,
    );
  }

  /** The share-key secret, created on first use and kept with the data so keys survive restarts. */
  async secret(): Promise<Buffer> {
    const stored = await this.meta.get("shareKeySecret");
    if (stored) return Buffer.from(stored, "hex");
    const secret = randomBytes(32);
    await this.meta.put("shareKeySecret", secret.toString("hex"));
    return secret;
  }
}
