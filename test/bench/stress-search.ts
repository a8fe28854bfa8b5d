/**
 * Wildcard search under stress: 20-wildcard patterns that made the regular expressions they used to
 * become backtrack, over 10,000 networks of which one in a hundred has a name built against them,
 * through the catalogue's list function, beside an ordinary `like` as the reference.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NetworkCatalog } from "../../src/networks/catalog.js";
import type { NetworkInput } from "../../src/networks/model.js";
import { benchDocument } from "./network-documents.js";
import { onCleanup } from "./cleanup.js";
import { ms, verdict, type Row } from "./report.js";
import { sample, summarize } from "./stats.js";

const COUNT = 10_000;
const RUNS = 20;
const TARGET_MS = 100;
const TWENTY_WILDCARDS = `${"*a".repeat(19)}*b`;
/**
 * Names against TWENTY_WILDCARDS: a miss on which the regular expression never finished, a match,
 * and a miss that only the last middle piece decides.
 */
const HOSTILE_NAMES = ["a".repeat(60), `${"a".repeat(60)}b`, `${"a".repeat(18)}b`];

function document(i: number): NetworkInput {
  const doc = benchDocument(i);
  if (i % 100 !== 0) return doc;
  return { ...doc, name: [{ lang: "en", value: HOSTILE_NAMES[(i / 100) % HOSTILE_NAMES.length]! }] };
}

const QUERIES: readonly { readonly figure: string; readonly query: string; readonly targeted: boolean }[] = [
  { figure: "like(name.en,*a*a…*b), 20 wildcards", query: `like(name.en,${TWENTY_WILDCARDS})`, targeted: true },
  { figure: "match(a*a…*b), 20 wildcards in a word", query: `match(a${TWENTY_WILDCARDS})`, targeted: true },
  { figure: "like(name.en,*heal*)", query: "like(name.en,*heal*)", targeted: false },
];

export async function searchStressRows(log: (s: string) => void): Promise<Row[]> {
  const dir = await mkdtemp(join(tmpdir(), "rock-bench-stress-search-"));
  const removeDir = onCleanup(() => rm(dir, { recursive: true, force: true }));
  try {
    const catalog = await NetworkCatalog.open(join(dir, "catalog"));
    try {
      log(`stress search: creating ${COUNT.toLocaleString("en-US")} networks…`);
      for (let i = 0; i < COUNT; i++) await catalog.create({ ...document(i), id: `n${i}` }, "bench");
      const rows: Row[] = [];
      for (const { figure, query, targeted } of QUERIES) {
        log(`stress search: ${query.slice(0, 60)}, ${RUNS} runs…`);
        const matches = catalog.list({ query, limit: 20 }).total;
        const s = summarize(await sample(RUNS, 2, async () => catalog.list({ query, limit: 20 })));
        rows.push({
          figure: `${figure} (${matches} matches)`,
          value: `${ms(s.p50)} / ${ms(s.p95)}`,
          ...(targeted ? { target: `p50 < ${TARGET_MS} ms`, verdict: verdict(s.p50 < TARGET_MS) } : { reference: "(reference)" }),
        });
      }
      return rows;
    } finally {
      await catalog.close();
    }
  } finally {
    await removeDir();
  }
}
