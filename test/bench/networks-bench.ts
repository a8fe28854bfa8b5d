/**
 * The draft network catalogue against raw LevelDB on the same machine: write rates of the catalogue
 * (directly in this process, as test/networks/bench.ts measures them, and through REST to the server
 * in its own process) and list-with-query latency at 10,000 networks over REST.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Level } from "level";
import { NetworkCatalog } from "../../src/networks/catalog.js";
import { onCleanup } from "./cleanup.js";
import { HttpClient } from "./http-client.js";
import { startServerProcess } from "./server-process.js";
import { ms, percent, perSecond, section, verdict, type Section } from "./report.js";
import { rate, sample, summarize } from "./stats.js";
import { benchDocument } from "../networks/bench-documents.js";

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

export async function runNetworksBench(o: NetworksBenchOptions): Promise<Section[]> {
  const count = o.quick ? 1000 : 10_000;
  const changes = Math.min(count, o.quick ? 500 : 5000);
  const queryRuns = o.quick ? 100 : 1000;
  const dir = await mkdtemp(join(tmpdir(), "rock-bench-networks-"));
  const removeDir = onCleanup(() => rm(dir, { recursive: true, force: true }));
  try {
    // ---- raw level ----
    o.log(`networks: raw level, ${count} puts/gets/batches…`);
    const raw = new Level<string, string>(join(dir, "raw"), { valueEncoding: "json" });
    const value = JSON.stringify({ document: doc(1), revision: doc(1) });
    const rawPut = await rate(count, (i) => raw.put(`p${i}`, value));
    const rawGet = await rate(count, (i) => raw.get(`p${i}`));
    const rawBatch = await rate(count, (i) => raw.batch([{ type: "put", key: `k${i}`, value }]));
    const rawBatch3 = await rate(count, (i) =>
      raw.batch([
        { type: "put", key: `a${i}`, value },
        { type: "put", key: `b${i}`, value },
        { type: "put", key: `c${i}`, value },
      ]),
    );
    await raw.close();

    // ---- the catalogue, directly ----
    o.log(`networks: catalogue (direct), ${count} creates, ${changes} updates and publications…`);
    const catalog = await NetworkCatalog.open(join(dir, "catalog"));
    let direct: { create: number; update: number; publish: number; queries: Record<string, ReturnType<typeof summarize>> };
    try {
      const create = await rate(count, (i) => catalog.create({ ...doc(i), id: `n${i}` }, "bench"));
      const update = await rate(changes, (i) => catalog.update(`n${i}`, doc(i + 1), "bench"));
      const publish = await rate(changes, (i) => catalog.publish(`n${i}`, "bench"));
      const queries: Record<string, ReturnType<typeof summarize>> = {};
      for (const [label, params] of Object.entries(QUERIES)) {
        queries[label] = summarize(await sample(queryRuns, 10, async () => catalog.list(params)));
      }
      direct = { create, update, publish, queries };
    } finally {
      await catalog.close();
    }

    // ---- the catalogue over REST ----
    o.log(`networks: REST, ${count} creates, ${changes} updates and publications, ${queryRuns} runs per query…`);
    const server = await startServerProcess({ rStart: false });
    const stopServer = server.stop;
    const http = new HttpClient(server.port, "cadmin");
    const json = { "content-type": "application/json" };
    let viaRest: typeof direct;
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
      { figure: "raw level batch (1 put)", value: perSecond(rawBatch), reference: "(write reference)" },
      { figure: "raw level batch (3 puts)", value: perSecond(rawBatch3) },
    );
    // The target is the store's: a sequential REST client is bounded by one HTTP round trip per write,
    // so the REST rows show the rate beside the raw level figure without a verdict.
    const writeRow = (figure: string, r: number, targeted: boolean) =>
      w.rows.push({
        figure,
        value: perSecond(r),
        reference: `batch ${perSecond(rawBatch)}`,
        ratio: percent(r / rawBatch),
        ...(targeted ? { target: "≥ 30%", verdict: verdict(r / rawBatch >= 0.3) } : {}),
      });
    writeRow("create, catalogue direct", direct.create, true);
    writeRow(`update, catalogue direct (${changes})`, direct.update, true);
    writeRow(`publish, catalogue direct (${changes})`, direct.publish, true);
    writeRow("create, REST POST", viaRest.create, false);
    writeRow(`update, REST PUT (${changes})`, viaRest.update, false);
    writeRow(`publish, REST PUT _publish (${changes})`, viaRest.publish, false);
    w.notes.push("Direct = NetworkCatalog in this process (as test/networks/bench.ts); REST = the server (node src/main.ts, R not started) in its own process, one keep-alive socket, user cadmin.");
    w.notes.push("Raw values are the JSON of one document and its revision; batch (1 put) is the reference of test/networks/bench.ts.");

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
    q.notes.push(`Values are p50 / p95 over ${queryRuns} runs after warm-up; REST = GET /ws/draft/networks?query=…, one keep-alive socket.`);
    return [w, q];
  } finally {
    await removeDir();
  }
}
