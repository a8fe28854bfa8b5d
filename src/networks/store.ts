import { randomBytes } from "node:crypto";
import { Level } from "level";
import type { NetworkDocument, NetworkRecord, NetworkState, RevisionRecord } from "./model.js";
import type { IndexEntry } from "./search/search-entry.js";

/**
 * LevelDB layout, one sublevel per kind: `doc` id → current document, `state` id → state,
 * `rev` id␀seq → revision, `idx` id → search index entry, `meta` → settings. Every change of a
 * network is one batch over these sublevels, so a crash leaves the old or the new network, never
 * a document whose state, history or index entry belongs to another version. A change of the state
 * alone (status, publication) puts state and index entry only: its document and history stand.
 */

const SEP = "\u0000";
const SEQ_WIDTH = 10;

function revKey(id: string, seq: number): string {
  return `${id}${SEP}${String(seq).padStart(SEQ_WIDTH, "0")}`;
}

/** The JSON of a revision around the JSON of its document, so that a document is stringified once. */
export function revisionJson(seq: number, author: string, date: string, comment: string | undefined, documentJson: string): string {
  // The same text as JSON.stringify of a RevisionRecord (same keys, same order).
  const c = comment ? `,"comment":${JSON.stringify(comment)}` : "";
  return `{"seq":${seq},"author":${JSON.stringify(author)},"date":${JSON.stringify(date)}${c},"document":${documentJson}}`;
}

/**
 * One change of a network, values already encoded as JSON text: what changed is put, nothing else.
 * A change that leaves the document as it is (status, publication) puts no document and no revision.
 */
export interface SaveOperation {
  readonly id: string;
  /** JSON of the new document; absent when the document did not change. */
  readonly documentJson?: string;
  readonly state: NetworkState;
  readonly entry: IndexEntry;
  /** Absent for changes that are not saves (status, publication). */
  readonly revision?: { readonly seq: number; readonly json: string };
}

export interface PutOperation {
  readonly type: "put";
  readonly key: string;
  readonly value: string;
}

/** Key prefixes of the sublevels that a change writes to. */
export interface KeyPrefixes {
  readonly doc: string;
  readonly state: string;
  readonly rev: string;
  readonly idx: string;
}

/** The prefixes the sublevels of the store's layout have in `db` (the benchmark's raw reference uses them too). */
export function keyPrefixes(db: { sublevel(name: string): { readonly prefix: string } }): KeyPrefixes {
  return {
    doc: db.sublevel("doc").prefix,
    state: db.sublevel("state").prefix,
    rev: db.sublevel("rev").prefix,
    idx: db.sublevel("idx").prefix,
  };
}

/** The root key of revision `seq` of network `id` (its other records are under prefix + id). */
export function revisionKey(prefixes: KeyPrefixes, id: string, seq: number): string {
  return prefixes.rev + revKey(id, seq);
}

/**
 * The puts of one change on the root database with the sublevels' key prefixes and the values as
 * JSON text (utf8): the bytes stored are those the sublevels' json encoding would store, but nothing
 * is stringified twice and no sublevel or chained-batch layer runs per operation.
 */
export function savePuts(prefixes: KeyPrefixes, op: SaveOperation): PutOperation[] {
  const id = op.id;
  const ops: PutOperation[] = [
    { type: "put", key: prefixes.state + id, value: JSON.stringify(op.state) },
    { type: "put", key: prefixes.idx + id, value: JSON.stringify(op.entry) },
  ];
  if (op.documentJson !== undefined) ops.push({ type: "put", key: prefixes.doc + id, value: op.documentJson });
  if (op.revision) ops.push({ type: "put", key: revisionKey(prefixes, id, op.revision.seq), value: op.revision.json });
  return ops;
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
  /** Writes go to the root with these prefixes and pre-encoded values (see `savePuts`). */
  private readonly prefixes: KeyPrefixes;

  private constructor(private readonly db: Level<string, string>) {
    this.docs = db.sublevel<string, NetworkDocument>("doc", { valueEncoding: "json" });
    this.states = db.sublevel<string, NetworkState>("state", { valueEncoding: "json" });
    this.revs = db.sublevel<string, RevisionRecord>("rev", { valueEncoding: "json" });
    this.idx = db.sublevel<string, IndexEntry>("idx", { valueEncoding: "json" });
    this.meta = db.sublevel<string, string>("meta", { valueEncoding: "utf8" });
    this.prefixes = keyPrefixes(db);
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

  /** One array batch of `savePuts`. */
  save(op: SaveOperation): Promise<void> {
    return this.db.batch(savePuts(this.prefixes, op));
  }

  async saveEntries(entries: readonly IndexEntry[]): Promise<void> {
    const batch = this.db.batch();
    for (const e of entries) batch.put(e.id, e, { sublevel: this.idx });
    await batch.write();
  }

  /** Removes a network and its whole history in one batch. */
  async remove(id: string): Promise<void> {
    const revKeys = await this.revs.keys({ gt: `${id}${SEP}`, lt: `${id}${SEP}\uffff` }).all();
    const batch = this.db.batch().del(id, { sublevel: this.docs }).del(id, { sublevel: this.states }).del(id, { sublevel: this.idx });
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
