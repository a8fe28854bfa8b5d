/** Engine figures: p50/p99 of session creation and of an eval round-trip of `1+1` (JSON and RDS). */
import { startRig, text } from "./support.js";

function percentiles(samples: number[]): string {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number): string => (sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]! * 1000).toFixed(0);
  return `p50 ${at(0.5)} µs, p99 ${at(0.99)} µs (n=${samples.length})`;
}

/** Durations of `work`, or what it reports itself when it answers a number (ms). */
async function time(count: number, work: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    const own = await work();
    samples.push(typeof own === "number" ? own : performance.now() - start);
  }
  return samples;
}

const rig = await startRig();
try {
  // Back to back: each creation also waits for the fork of the previous one's replacement spare.
  const created = await time(50, () => rig.engine.createSession("bench"));
  console.log(`create session, back to back: ${percentiles(created)}`);
  // As clients do (a pause between creations): the spare session is forked by then.
  const paced = await time(50, async () => {
    await new Promise((resolve) => setTimeout(resolve, 30));
    const start = performance.now();
    await rig.engine.createSession("bench");
    return performance.now() - start;
  });
  console.log(`create session, 30 ms apart: ${percentiles(paced)}`);
  await rig.engine.endAllSessions();
  await rig.engine.createSession("bench");
  const session = rig.engine.sessions()[0]!;
  const script = text("1+1");
  await time(500, () => session.eval(script, "json"));
  console.log(`eval 1+1 json:  ${percentiles(await time(5000, () => session.eval(script, "json")))}`);
  console.log(`eval 1+1 rds:   ${percentiles(await time(5000, () => session.eval(script, "rds")))}`);
  const vector = text("1:10 / 3");
  console.log(`eval 1:10/3 json (jsonlite path): ${percentiles(await time(2000, () => session.eval(vector, "json")))}`);
} finally {
  await rig.close();
}
