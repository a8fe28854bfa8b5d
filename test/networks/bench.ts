/**
 * Catalogue throughput against raw LevelDB: create/update/publish rates and query p50 at 10,000
 * networks. Run: `npx tsx test/networks/bench.ts [count]`.
 *
 * A quick look, not the reference measurement (that is test/bench/networks-bench.ts, which
 * interleaves the catalogue with raw `level` in a worker thread). Write rates are compared with raw
 * `level` batches measured in the same run: a batch of one put (the earlier reference), and a batch of
 * as many puts as the catalogue write makes, pre-encoded, with values of the catalogue's sizes (state,
 * index entry, and for saves document and revision). The raw rates are measured before and after the
 * catalogue (the machine may drift during a run); ratios use their mean, and both are printed.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Level } from "level";
import { NetworkCatalog } from "../../src/networks/catalog.js";
import { normalizeDocument } from "../../src/networks/document.js";
import { indexEntryOf } from "../../src/networks/search/search-entry.js";
import * as machine from "../../src/networks/state-machine.js";
import { benchDocument } from "./bench-documents.js";

const COUNT = Number(process.argv[2] ?? 10_000);
const doc = benchDocument;

function rate(n: number, ms: number): number {
  return Math.round((n / ms) * 1000);
}

async function timed(n: number, work: (i: number) => Promise<unknown>): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < n; i++) await work(i);
  return rate(n, performance.now() - start);
}

/**
 * Puts per catalogue write (see NetworkStore.save): a save (create, update) puts state, index entry,
 * document and revision; a change of state alone (publish) puts state and index entry.
 */
const PUTS = { create: 4, update: 4, publish: 2 } as const;

/** Values of the catalogue's sizes (JSON of state, index entry, document, revision), first puts first. */
function catalogueShapedValues(): string[] {
  const document = normalizeDocument({ ...doc(1), id: "n1" }, "n1");
  const state = machine.created(new Date().toISOString());
  return [
    JSON.stringify(state),
    JSON.stringify(indexEntryOf({ document, state })),
    JSON.stringify(document),
    JSON.stringify({ seq: 1, author: "bench", date: state.lastUpdate, document }),
  ];
}

interface RawRates {
  readonly batch1: number;
  readonly batch2: number;
  readonly batch4: number;
}

let rawRun = 0;
/** Raw level batch rates, each in a fresh database (as the catalogue starts from an empty one). */
async function rawRates(dir: string): Promise<RawRates> {
  const run = rawRun++;
  const open = async (name: string) => {
    const db = new Level<string, string>(join(dir, `raw-${run}-${name}`), { valueEncoding: "json" });
    await db.open();
    return db;
  };
  // The earlier reference: the JSON of one document and its revision in one put.
  const value = JSON.stringify({ document: doc(1), revision: doc(1) });
  let db = await open("1");
  const batch1 = await timed(COUNT, (i) => db.batch([{ type: "put", key: `k${i}`, value }]));
  await db.close();
  const shaped = catalogueShapedValues();
  const prefixes = ["!state!", "!idx!", "!doc!", "!rev!"];
  const rates: number[] = [];
  for (const puts of [2, 4]) {
    db = await open(String(puts));
    const utf8 = db.sublevel<string, string>("x", { valueEncoding: "utf8" });
    rates.push(
      await timed(COUNT, (i) =>
        utf8.batch(shaped.slice(0, puts).map((v, j) => ({ type: "put" as const, key: `${prefixes[j]}n${i}`, value: v }))),
      ),
    );
    await db.close();
  }
  return { batch1, batch2: rates[0]!, batch4: rates[1]! };
}

const dir = await mkdtemp(join(tmpdir(), "networks-bench-"));
try {
  const rawBefore = await rawRates(dir);

  const catalog = await NetworkCatalog.open(join(dir, "catalog"));
  const createRate = await timed(COUNT, (i) => catalog.create({ ...doc(i), id: `n${i}` }, "bench"));
  const updates = Math.min(COUNT, 5000);
  const updateRate = await timed(updates, (i) => catalog.update(`n${i}`, doc(i + 1), "bench"));
  const publishRate = await timed(updates, (i) => catalog.publish(`n${i}`, "bench"));

  // Some published networks edited again and some under review, so that every filter selects.
  for (let i = 0; i * 5 < updates; i++) await catalog.update(`n${i * 5}`, doc(i * 5 + 2), "bench");
  for (let i = 0; i * 7 + 1 < COUNT && i < 500; i++) await catalog.setStatus(`n${i * 7 + 1}`, "UNDER_REVIEW");

  const queries: Record<string, Parameters<NetworkCatalog["list"]>[0]> = {
    "list limit 20": { limit: 20 },
    "match(heal*)": { query: "match(heal*)", limit: 20 },
    "match(sante cohort)": { query: "match(sante cohort)", limit: 20 },
    "and(eq(studyIds,s7),not(eq(model.country,FR)))": { query: "and(eq(studyIds,s7),not(eq(model.country,FR)))", limit: 20 },
    "like(name.en,*network 12*) sort name.en desc": { query: "like(name.en,*network 12*)", sort: "name.en", order: "desc", limit: 20 },
    "filter IN_EDITION sort lastModifiedDate": { filter: "IN_EDITION", sort: "lastModifiedDate", limit: 20 },
    "eq(published,true)": { query: "eq(published,true)", limit: 20 },
    "eq(model.country,FR) sort name.fr from 2000": { query: "eq(model.country,FR)", sort: "name.fr", from: 2000, limit: 20 },
    "in(id,(n1,n2,n3))": { query: "in(id,(n1,n2,n3))" },
    "exists(model.contact.email) sort acronym.en desc": { query: "exists(model.contact.email)", sort: "acronym.en", order: "desc", limit: 20 },
    "like(name.en,heal*)": { query: "like(name.en,heal*)", limit: 20 },
    "like(model.contact.email,n12*)": { query: "like(model.contact.email,n12*)", limit: 20 },
    "study=s7 filter PUBLISHED": { study: "s7", filter: "PUBLISHED", limit: 20 },
    "filter UNDER_REVIEW exclude n1,n8": { filter: "UNDER_REVIEW", exclude: ["n1,n8"], limit: 20 },
    "or(eq(revisionStatus,UNDER_REVIEW),eq(model.size,7))": { query: "or(eq(revisionStatus,UNDER_REVIEW),eq(model.size,7))", limit: 20 },
    "model.size=gt=90 (full scan)": { query: "model.size=gt=90", limit: 20 },
  };
  const p50 = (times: number[]) => Number(times.sort((a, b) => a - b)[Math.floor(times.length / 2)]!.toFixed(2));
  const p50s: Record<string, number> = {};
  for (const [label, params] of Object.entries(queries)) {
    const times: number[] = [];
    for (let i = 0; i < 101; i++) {
      const start = performance.now();
      catalog.list(params);
      times.push(performance.now() - start);
    }
    p50s[label] = p50(times);
  }
  // A write between lists: what a busy catalogue pays when cached orders or indexes must follow it.
  for (const [label, params] of Object.entries({
    "after a write: sort name.en limit 20": { sort: "name.en", limit: 20 },
    "after a write: like(name.en,heal*)": { query: "like(name.en,heal*)", limit: 20 },
  })) {
    const times: number[] = [];
    for (let i = 0; i < 101; i++) {
      await catalog.update(`n${i}`, { ...doc(i), name: [{ lang: "en", value: `renamed ${i} ${performance.now()}` }] }, "bench");
      const start = performance.now();
      catalog.list(params);
      times.push(performance.now() - start);
    }
    p50s[label] = p50(times);
  }
  await catalog.close();
  const rawAfter = await rawRates(dir);
  const mean = (k: keyof RawRates) => Math.round((rawBefore[k] + rawAfter[k]) / 2);
  const raw: RawRates = { batch1: mean("batch1"), batch2: mean("batch2"), batch4: mean("batch4") };
  const samePuts = (puts: number) => (puts === 2 ? raw.batch2 : raw.batch4);
  const percent = (r: number, reference: number) => `${Math.round((r / reference) * 100)}%`;
  const write = (rate: number, puts: number) => ({
    perSecond: rate,
    puts,
    vsRawBatchOf1: percent(rate, raw.batch1),
    [`vsRawBatchOf${puts}`]: percent(rate, samePuts(puts)),
  });
  console.log(JSON.stringify({
    networks: COUNT,
    rawLevelBatchPerSecond: { ...raw, before: rawBefore, after: rawAfter },
    create: write(createRate, PUTS.create),
    update: write(updateRate, PUTS.update),
    publish: write(publishRate, PUTS.publish),
    target: "create and update ≥ 50%, publish ≥ 30% of a raw batch of as many puts (npm run bench measures it interleaved)",
    queryP50Ms: p50s,
  }, null, 2));
} finally {
  await rm(dir, { recursive: true, force: true });
}
