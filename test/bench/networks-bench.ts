/**
 * The draft network catalogue against raw LevelDB on the same machine: write rates of the catalogue
 * (directly in this process, and through REST to the server in its own process) beside raw `level`
 * batches of the very puts those writes make, and list-with-query latency at 10,000 networks over REST.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Level } from "level";
import { Worker } from "node:worker_threads";
import { NetworkCatalog } from "../../src/networks/catalog.js";
import type { NetworkInput } from "../../src/networks/model.js";
import { onCleanup } from "./cleanup.js";
import { HttpClient } from "./http-client.js";
import { startServerProcess } from "./server-process.js";
import { ms, percent, perSecond, section, verdict, type Section } from "./report.js";
import { rate, sample, summarize } from "./stats.js";
import { AUTHOR, type RawAnswer, type RawRequest, type RawTimes, type WriteKind } from "./raw-level-batches.js";
import { benchDocument } from "./network-documents.js";

export interface NetworksBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

const doc = benchDocument;

/** The same document as the REST (proto3 JSON) body of a Network. */
function wire(i: number, id: string): string {
  const { model, ...rest } = doc(i);
  return JSON.stringify({ ...rest, id, content: JSON.stringify(model) });
}

interface ListParams {
  readonly query?: string;
  readonly filter?: string;
  readonly sort?: string;
  readonly order?: string;
  readonly limit?: number;
}

const QUERIES: Record<string, ListParams> = {
  "list limit 20": { limit: 20 },
  "match(heal*)": { query: "match(heal*)", limit: 20 },
  "match(sante cohort)": { query: "match(sante cohort)", limit: 20 },
  "eq(studyIds,s7)": { query: "eq(studyIds,s7)", limit: 20 },
  "and(eq(studyIds,s7),not(eq(model.country,FR)))": { query: "and(eq(studyIds,s7),not(eq(model.country,FR)))", limit: 20 },
  "like(name.en,*network 12*) sort name.en desc": { query: "like(name.en,*network 12*)", sort: "name.en", order: "desc", limit: 20 },
  "filter IN_EDITION sort lastModifiedDate": { filter: "IN_EDITION", sort: "lastModifiedDate", limit: 20 },
};
/** The queries that carry the p50 ≤ 10 ms target. */
const TARGETED = new Set(["match(heal*)", "eq(studyIds,s7)"]);

function queryString(p: ListParams): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(p)) q.set(k, String(v));
  return q.toString();
}

/**
 * The raw reference in its worker thread (test/bench/raw-level-batches.ts), one request at a
 * time. The worker loads TypeScript through tsx's API: a worker does not inherit the loader that
 * `tsx` gave this thread.
 */
class RawReference {
  private waiting: { resolve: (answer: RawAnswer) => void; reject: (e: Error) => void } | undefined;

  private constructor(private readonly worker: Worker) {
    worker.on("message", (answer: RawAnswer) => this.settle((w) => w.resolve(answer)));
    worker.on("error", (e) => this.settle((w) => w.reject(e)));
    worker.on("exit", (code) => this.settle((w) => w.reject(new Error(`the raw reference worker exited (${code})`))));
  }

  static async open(dir: string): Promise<RawReference> {
    const module = new URL("./raw-level-batches.ts", import.meta.url).href;
    const boot = `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then(({ register }) => { register(); return import(${JSON.stringify(module)}); });`;
    const reference = new RawReference(new Worker(boot, { eval: true }));
    try {
      await reference.request({ type: "open", dir });
    } catch (e) {
      await reference.worker.terminate();
      throw e;
    }
    return reference;
  }

  private settle(action: (w: NonNullable<RawReference["waiting"]>) => void): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    if (waiting) action(waiting);
  }

  private async request(request: RawRequest): Promise<RawTimes | undefined> {
    const answer = await new Promise<RawAnswer>((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.worker.postMessage(request);
    });
    if (answer.type === "failed") throw new Error(`raw reference: ${answer.message}`);
    return answer.times;
  }

  /** What the worker took to store, one batch each, the records of `kind` for these networks. */
  async time(kind: WriteKind, ids: readonly number[], stamp: string, preEncodedFirst: boolean): Promise<RawTimes> {
    return (await this.request({ type: "time", kind, ids, stamp, preEncodedFirst }))!;
  }

  async close(): Promise<void> {
    try {
      await this.request({ type: "close" });
    } finally {
      await this.worker.terminate();
    }
  }
}

interface Interleaved {
  /** Writes per second over all rounds: the catalogue, raw records (the reference), raw pre-encoded. */
  readonly catalogue: number;
  readonly reference: number;
  readonly preEncoded: number;
}

/**
 * Writes `kind` for networks first..first+n-1 through the catalogue and, in turn, the same puts as raw
 * `level` batches, in `rounds` rounds of n/rounds writes each (the side that goes first alternates),
 * so that both sides meet the machine's slow and fast minutes alike. Each side builds its inputs just
 * before its clock starts (input objects for the catalogue, put arrays for raw) and drops them after.
 */
async function interleavedWrites(
  kind: WriteKind,
  first: number,
  n: number,
  rounds: number,
  catalog: NetworkCatalog,
  raw: RawReference,
): Promise<Interleaved> {
  const per = Math.ceil(n / rounds);
  const stamp = new Date().toISOString();
  let catalogueMs = 0;
  let referenceMs = 0;
  let preEncodedMs = 0;
  for (let r = 0; r * per < n; r++) {
    const ids = Array.from({ length: Math.min(per, n - r * per) }, (_, k) => first + r * per + k);
    const timeCatalogue = async () => {
      // As a decoded request body holds them (flat strings, where benchDocument builds concatenations).
      const inputs = ids.map(
        (i) => JSON.parse(JSON.stringify(kind === "create" ? { ...doc(i), id: `n${i}` } : doc(i + 1))) as NetworkInput,
      );
      const start = performance.now();
      if (kind === "create") for (const input of inputs) await catalog.create(input, AUTHOR);
      else if (kind === "update") for (let k = 0; k < ids.length; k++) await catalog.update(`n${ids[k]}`, inputs[k]!, AUTHOR);
      else for (const i of ids) await catalog.publish(`n${i}`, AUTHOR);
      catalogueMs += performance.now() - start;
    };
    const timeReference = async () => {
      const times = await raw.time(kind, ids, stamp, r % 4 >= 2);
      referenceMs += times.records;
      preEncodedMs += times.preEncoded;
    };
    if (r % 2 === 0) {
      await timeReference();
      await timeCatalogue();
    } else {
      await timeCatalogue();
      await timeReference();
    }
  }
  return { catalogue: (n / catalogueMs) * 1000, reference: (n / referenceMs) * 1000, preEncoded: (n / preEncodedMs) * 1000 };
}

/**
 * In a fresh catalogue and raw database under `dir`, each interleaved with its raw reference: creates,
 * updates and publications; then `queries` run once (as a served catalogue has answered lists) and
 * `later` more creates, which keep up the orders and lookups those lists made.
 */
async function directWrites(dir: string, count: number, changes: number, later: number, rounds: number, queries: readonly ListParams[]) {
  const catalog = await NetworkCatalog.open(join(dir, "catalog"));
  try {
    const raw = await RawReference.open(join(dir, "raw"));
    try {
      const create = await interleavedWrites("create", 0, count, rounds, catalog, raw);
      const update = await interleavedWrites("update", 0, changes, rounds, catalog, raw);
      const publish = await interleavedWrites("publish", 0, changes, rounds, catalog, raw);
      for (const params of queries) catalog.list(params);
      const createAfterLists = await interleavedWrites("create", count, later, rounds, catalog, raw);
      return { catalog, create, update, publish, createAfterLists };
    } finally {
      await raw.close();
    }
  } catch (e) {
    await catalog.close();
    throw e;
  }
}

export async function runNetworksBench(o: NetworksBenchOptions): Promise<Section[]> {
  const count = o.quick ? 1000 : 10_000;
  const changes = Math.min(count, o.quick ? 500 : 5000);
  const queryRuns = o.quick ? 100 : 1000;
  const rounds = o.quick ? 4 : 20;
  const later = o.quick ? 200 : 2000;
  const dir = await mkdtemp(join(tmpdir(), "rock-bench-networks-"));
  const removeDir = onCleanup(() => rm(dir, { recursive: true, force: true }));
  try {
    // ---- raw level, for context ----
    o.log(`networks: raw level, ${count} puts/gets/batches…`);
    const raw = new Level<string, string>(join(dir, "raw-context"), { valueEncoding: "json" });
    const value = JSON.stringify({ document: doc(1), revision: doc(1) });
    const rawPut = await rate(count, (i) => raw.put(`p${i}`, value));
    const rawGet = await rate(count, (i) => raw.get(`p${i}`));
    const rawBatch = await rate(count, (i) => raw.batch([{ type: "put", key: `k${i}`, value }]));
    await raw.close();

    // ---- the catalogue, directly, beside raw batches of the same puts ----
    const warm = Math.min(count, 1000);
    o.log(`networks: warm-up, ${warm} writes of each kind (catalogue and raw, thrown away)…`);
    const lists = Object.values(QUERIES);
    const warmUp = await directWrites(join(dir, "warm-up"), warm, warm, warm, 2, lists);
    await warmUp.catalog.close();
    o.log(
      `networks: catalogue (direct) and raw batches of its puts, ${count} creates, ${changes} updates and publications, then ${later} creates after lists, in ${rounds} rounds…`,
    );
    const writes = await directWrites(dir, count - later, changes, later, rounds, lists);
    const catalog = writes.catalog;
    let direct: { queries: Record<string, ReturnType<typeof summarize>> };
    try {
      const queries: Record<string, ReturnType<typeof summarize>> = {};
      for (const [label, params] of Object.entries(QUERIES)) {
        queries[label] = summarize(await sample(queryRuns, 10, async () => catalog.list(params)));
      }
      direct = { queries };
    } finally {
      await catalog.close();
    }

    // ---- the catalogue over REST ----
    o.log(`networks: REST, ${count} creates, ${changes} updates and publications, ${queryRuns} runs per query…`);
    const server = await startServerProcess({ rStart: false });
    const stopServer = server.stop;
    const http = new HttpClient(server.port, "cadmin");
    const json = { "content-type": "application/json" };
    let viaRest: { create: number; update: number; publish: number; queries: Record<string, ReturnType<typeof summarize>> };
    try {
      await http.ok("GET", "/ws/draft/networks?limit=1"); // warms up the connection and the auth path
      const create = await rate(count, (i) => http.ok("POST", "/ws/draft/networks", { headers: json, body: wire(i, `n${i}`) }, 201));
      const update = await rate(changes, (i) => http.ok("PUT", `/ws/draft/network/n${i}`, { headers: json, body: wire(i + 1, `n${i}`) }));
      const publish = await rate(changes, (i) => http.ok("PUT", `/ws/draft/network/n${i}/_publish`));
      const first = await http.ok("GET", "/ws/draft/networks?limit=1");
      const total = (JSON.parse(first.body.toString("utf8")) as unknown[]).length;
      if (total !== 1) throw new Error(`unexpected list answer: ${first.body.toString("utf8", 0, 200)}`);
      const queries: Record<string, ReturnType<typeof summarize>> = {};
      for (const [label, params] of Object.entries(QUERIES)) {
        const path = `/ws/draft/networks?${queryString(params)}`;
        queries[label] = summarize(await sample(queryRuns, 20, () => http.ok("GET", path)));
      }
      viaRest = { create, update, publish, queries };
    } finally {
      http.close();
      await stopServer();
    }

    const w = section(`Networks: write rates at ${count.toLocaleString("en-US")} networks vs raw level (same machine, sequential)`);
    w.rows.push(
      { figure: "raw level put", value: perSecond(rawPut) },
      { figure: "raw level get", value: perSecond(rawGet) },
      { figure: "raw level batch (1 put of 0.8 kB)", value: perSecond(rawBatch), reference: "(earlier write reference)" },
    );
    const records = { create: 4, update: 4, publish: 2 } as const;
    const referenceOf = (kind: WriteKind, r: Interleaved) =>
      `${records[kind]} records ${perSecond(r.reference)} (pre-encoded ${perSecond(r.preEncoded)})`;
    // The target is the store's: a sequential REST client is bounded by one HTTP round trip per write,
    // so the REST rows show the rate beside the raw figure without a verdict.
    const directRow = (kind: WriteKind, figure: string, target: number) => {
      const r = writes[kind];
      w.rows.push({
        figure,
        value: perSecond(r.catalogue),
        reference: referenceOf(kind, r),
        ratio: percent(r.catalogue / r.reference),
        target: `≥ ${percent(target)}`,
        verdict: verdict(r.catalogue / r.reference >= target),
      });
    };
    directRow("create", `create, catalogue direct (${(count - later).toLocaleString("en-US")})`, 0.5);
    directRow("update", `update, catalogue direct (${changes})`, 0.5);
    directRow("publish", `publish, catalogue direct (${changes})`, 0.3);
    const after = writes.createAfterLists;
    w.rows.push({
      figure: `create after the lists below (${later})`,
      value: perSecond(after.catalogue),
      reference: referenceOf("create", after),
      ratio: percent(after.catalogue / after.reference),
    });
    const restRow = (kind: WriteKind, figure: string, r: number) =>
      w.rows.push({
        figure,
        value: perSecond(r),
        reference: `${records[kind]} records ${perSecond(writes[kind].reference)}`,
        ratio: percent(r / writes[kind].reference),
      });
    restRow("create", "create, REST POST", viaRest.create);
    restRow("update", `update, REST PUT (${changes})`, viaRest.update);
    restRow("publish", `publish, REST PUT _publish (${changes})`, viaRest.publish);
    w.notes.push(
      "Direct = NetworkCatalog in this process. Its reference is raw `level` storing the very records of each write as one batch: the same keys, and the state, index entry, " +
        "document and revision objects written through level's json encoding (the same bytes, timestamps of the same length). Pre-encoded = the same records handed to level as JSON text " +
        "built before the clock starts, a tight loop of native calls: shown, not the reference (see test/bench/README.md on why a loop with no work between writes is not comparable on this VM).",
    );
    w.notes.push(
      `Raw runs in a worker thread (a heap of its own: neither side's turn pays for collecting the other's objects), in ${rounds} rounds alternating with the catalogue ` +
        `(each side goes first every other round), after ${warm.toLocaleString("en-US")} writes of each kind on both sides are thrown away. Inputs are built before each side's clock starts ` +
        "(the catalogue's as a decoded request body holds them). Rates are over all rounds, garbage collection included.",
    );
    w.notes.push(
      `The target rows write into a catalogue that has answered no list yet; lookups are built by the first list that needs them (field values per path, list orders, sorted dictionaries) and kept from then on. ` +
        `The row after the lists writes the last ${later.toLocaleString("en-US")} networks once each query of the list table has run once: what a served catalogue keeps up per write.`,
    );
    w.notes.push(
      "REST = the server (node src/main.ts, R not started) in its own process, one keep-alive socket, user cadmin; its reference is the direct rows' raw figure.",
    );

    const q = section(`Networks: list with query at ${count.toLocaleString("en-US")} networks (limit 20)`);
    for (const label of Object.keys(QUERIES)) {
      const r = viaRest.queries[label]!;
      const d = direct.queries[label]!;
      const targeted = TARGETED.has(label);
      q.rows.push({
        figure: `REST ${label}`,
        value: `${ms(r.p50)} / ${ms(r.p95)}`,
        reference: `direct ${ms(d.p50)} / ${ms(d.p95)}`,
        ...(targeted ? { target: "p50 ≤ 10 ms", verdict: verdict(r.p50 <= 10) } : {}),
      });
    }
    q.rows.push({ figure: "raw level get (per key)", value: ms(1000 / rawGet), reference: "(reference)" });
    q.notes.push(
      `Values are p50 / p95 over ${queryRuns} runs after warm-up; REST = GET /ws/draft/networks?query=…, one keep-alive socket.`,
    );
    return [w, q];
  } finally {
    await removeDir();
  }
}
