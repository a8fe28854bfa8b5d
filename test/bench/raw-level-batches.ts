/**
 * The raw reference of the catalogue bench, run in a worker thread: raw `level` batches of the very
 * puts that catalogue writes make. The thread has a heap of its own, so the collector never spends
 * one side's turn on the other side's objects (sharing the catalogue's heap, raw batches were paying
 * scavenges of the catalogue's survivors). See test/bench/networks-bench.ts for the protocol's other end.
 */
import { join } from "node:path";
import { parentPort } from "node:worker_threads";
import { Level } from "level";
import { normalizeDocument } from "../../src/networks/document.js";
import type { NetworkState, RevisionRecord } from "../../src/networks/model.js";
import { indexEntryOf } from "../../src/networks/search/search-entry.js";
import * as machine from "../../src/networks/state-machine.js";
import { keyPrefixes, revisionKey, type KeyPrefixes, type PutOperation } from "../../src/networks/store.js";
import { benchDocument as doc } from "./network-documents.js";

export type WriteKind = "create" | "update" | "publish";

export const AUTHOR = "bench";

export type RawRequest =
  | { readonly type: "open"; readonly dir: string }
  | {
      readonly type: "time";
      readonly kind: WriteKind;
      readonly ids: readonly number[];
      readonly stamp: string;
      readonly preEncodedFirst: boolean;
    }
  | { readonly type: "close" };

/** Milliseconds of one round: `records` by level's json encoding (the reference), `preEncoded` as JSON text. */
export interface RawTimes {
  readonly records: number;
  readonly preEncoded: number;
}

export type RawAnswer = { readonly type: "done"; readonly times?: RawTimes } | { readonly type: "failed"; readonly message: string };

/** A put of one record, as `level` takes it with its json encoding. */
interface RecordPut {
  readonly type: "put";
  readonly key: string;
  readonly value: object;
}

/**
 * The records the catalogue stores for write `kind` of network `n{i}` (see NetworkCatalog.commit),
 * under the same keys, as objects for `level`'s json encoding to write: the same bytes as the
 * catalogue's puts but for the timestamps, which have the catalogue's length. A create stores state,
 * index entry, document and revision 1; an update (to document i + 1) the same with revision 2; a
 * publication state and index entry only.
 */
function catalogueRecords(kind: WriteKind, i: number, stamp: string, prefixes: KeyPrefixes): RecordPut[] {
  const id = `n${i}`;
  const document = normalizeDocument({ ...doc(kind === "create" ? i : i + 1), id }, id);
  const created = machine.created(stamp);
  const saved = machine.saved(created, stamp);
  const state: NetworkState = kind === "create" ? created : kind === "update" ? saved : machine.published(saved, stamp, AUTHOR);
  const records: RecordPut[] = [
    { type: "put", key: prefixes.state + id, value: state },
    { type: "put", key: prefixes.idx + id, value: indexEntryOf({ document, state }) },
  ];
  if (kind === "publish") return records;
  const revision: RevisionRecord = { seq: state.head, author: AUTHOR, date: stamp, document };
  records.push(
    { type: "put", key: prefixes.doc + id, value: document },
    { type: "put", key: revisionKey(prefixes, id, state.head), value: revision },
  );
  return records;
}

// The bench's own thread imports this module for its types and AUTHOR: only a worker answers requests.
const port = parentPort;
if (port) {
  interface Open {
    readonly records: Level<string, object>;
    readonly preEncoded: Level<string, string>;
    readonly prefixes: KeyPrefixes;
  }
  let db: Open | undefined;
  const answer = async (request: RawRequest): Promise<RawTimes | undefined> => {
    if (request.type === "open") {
      const records = new Level<string, object>(join(request.dir, "records"), { valueEncoding: "json" });
      const preEncoded = new Level<string, string>(join(request.dir, "pre-encoded"), { valueEncoding: "utf8" });
      await Promise.all([records.open(), preEncoded.open()]);
      db = { records, preEncoded, prefixes: keyPrefixes(records) };
      return undefined;
    }
    if (request.type === "close") {
      await Promise.all([db?.records.close(), db?.preEncoded.close()]);
      db = undefined;
      return undefined;
    }
    if (!db) throw new Error("the raw databases are not open");
    const { prefixes } = db;
    const { kind, stamp } = request;
    // Built before the clock starts, as the catalogue's inputs are: record objects that level
    // encodes as it writes, and the same records as the JSON text the catalogue hands to level.
    const { records, preEncoded } = db;
    const timeRecords = async () => {
      const batches = request.ids.map((i) => catalogueRecords(kind, i, stamp, prefixes));
      const start = performance.now();
      for (const batch of batches) await records.batch(batch);
      return performance.now() - start;
    };
    const timePreEncoded = async () => {
      const batches: PutOperation[][] = request.ids.map((i) =>
        catalogueRecords(kind, i, stamp, prefixes).map((r) => ({ type: "put", key: r.key, value: JSON.stringify(r.value) })),
      );
      const start = performance.now();
      for (const batch of batches) await preEncoded.batch(batch);
      return performance.now() - start;
    };
    if (request.preEncodedFirst) {
      const preEncodedMs = await timePreEncoded();
      return { records: await timeRecords(), preEncoded: preEncodedMs };
    }
    const recordsMs = await timeRecords();
    return { records: recordsMs, preEncoded: await timePreEncoded() };
  };
  port.on("message", (request: RawRequest) => {
    answer(request).then(
      (times) => port.postMessage({ type: "done", ...(times === undefined ? {} : { times }) } satisfies RawAnswer),
      (e: unknown) => port.postMessage({ type: "failed", message: e instanceof Error ? e.message : String(e) } satisfies RawAnswer),
    );
  });
}
