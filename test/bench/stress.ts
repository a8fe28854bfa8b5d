/**
 * `npm run stress`: what hostile or careless use costs the service, each figure beside its reference
 * and target — a flood of bad credentials, a pathological search pattern, big results and output.
 *
 *   STRESS_ONLY=auth|search|output|quotas   one part only
 */
import { cleanupAll } from "./cleanup.js";
import { render, section, type Row, type Section } from "./report.js";
import { authFloodRows } from "./stress-auth.js";
import { bigOutputRows } from "./stress-r-output.js";
import { quotaStressRows } from "./stress-quotas.js";
import { searchStressRows } from "./stress-search.js";

const PARTS: Record<string, { title: string; rows: (log: (s: string) => void) => Promise<Row[]> }> = {
  auth: { title: "Bad credentials flood (16 req/s of unknown users) against REST eval `1+1`", rows: authFloodRows },
  search: { title: "Wildcard search over 10,000 networks (ReDoS pattern)", rows: searchStressRows },
  output: { title: "Big results and output", rows: bigOutputRows },
  quotas: { title: "One session against the others: quotas, private /tmp, no network", rows: quotaStressRows },
};

const only = process.env.STRESS_ONLY ?? "";
if (only !== "" && !(only in PARTS)) {
  console.error(`STRESS_ONLY must be one of ${Object.keys(PARTS).join(", ")}, not ${JSON.stringify(only)}`);
  process.exit(2);
}

const started = performance.now();
const log = (line: string) => console.error(`[${((performance.now() - started) / 1000).toFixed(1)}s] ${line}`);
console.log("# rock stress figures");
const sections: Section[] = [];
let failed = false;
try {
  for (const [name, part] of Object.entries(PARTS)) {
    if (only !== "" && only !== name) continue;
    const s = section(part.title);
    s.rows.push(...(await part.rows(log)));
    console.log(render(s));
    sections.push(s);
  }
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  await cleanupAll();
}
const fails = sections.flatMap((s) => s.rows.filter((r) => r.verdict === "FAIL").map((r) => `${s.title}: ${r.figure}`));
console.log(
  `\nTargets: ${sections.flatMap((s) => s.rows).filter((r) => r.verdict === "pass").length} pass, ${fails.length} fail${fails.length ? `\n  - ${fails.join("\n  - ")}` : ""}`,
);
process.exit(failed ? 1 : 0);
