/**
 * `npm run bench`: the R service against Rserve and the network catalogue against raw LevelDB, each
 * figure beside a reference measured in the same run.
 *
 *   BENCH_QUICK=1         small counts, 100 MB files (smoke run)
 *   BENCH_ONLY=r|throughput|grpc|networks|observe|cluster|quotas|network|peers|transfers|suspend|assign|first one part only
 *                         (throughput: 1 and 4 clients against the design's floor; observe: what
 *                         logging and metrics cost a call; cluster: nodes behind HAProxy; quotas: what a
 *                         cgroup and a minimal root per session cost; peers: Rserve, plumber and OpenCPU
 *                         beside this server; transfers: curl against this server, nginx and bare node:http;
 *                         suspend: suspended sessions against R's saveRDS/readRDS, their memory, and
 *                         creation and evals against the code before them; assign: a large
 *                         data.frame assigned as rockr sends it and answered as R serialization,
 *                         against Node's decode plus R's unserialize, and R's serialize plus a transfer;
 *                         first: one client's first calls after a start and after an idle pause,
 *                         against the same server warm)
 */
import os from "node:os";
import { cleanupAll } from "./cleanup.js";
import { runClusterBench } from "./cluster-bench.js";
import { runGrpcBench } from "./grpc-bench.js";
import { runNetworksBench } from "./networks-bench.js";
import { runObserveBench } from "./observe-bench.js";
import { runPeersBench } from "./peers-bench.js";
import { runQuotasBench } from "./quotas-bench.js";
import { runNetworkBench } from "./network-bench.js";
import { runRBench } from "./r-bench.js";
import { runSuspendBench } from "./suspend-bench.js";
import { runAssignBench } from "./assign-bench.js";
import { runFirstCallsBench } from "./first-calls-bench.js";
import { runThroughputBench } from "./throughput-bench.js";
import { runTransfersBench } from "./transfers-bench.js";
import { render, type Section } from "./report.js";
import { rWorkerCount } from "./server-process.js";

const quick = ["1", "true", "yes"].includes((process.env.BENCH_QUICK ?? "").toLowerCase());
const only = process.env.BENCH_ONLY ?? "";
const parts = [
  "r",
  "throughput",
  "grpc",
  "networks",
  "observe",
  "cluster",
  "quotas",
  "network",
  "transfers",
  "peers",
  "suspend",
  "assign",
  "first",
];
if (only !== "" && !parts.includes(only)) {
  console.error(`BENCH_ONLY must be one of ${parts.join(", ")}, not ${JSON.stringify(only)}`);
  process.exit(2);
}

let interrupted = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    // Only the first signal counts: a Ctrl-C reaches this process twice (from the terminal and
    // relayed by tsx), and a second, default-handled SIGINT would kill it mid-cleanup.
    if (interrupted) return;
    interrupted = true;
    console.error(`\n${signal}: cleaning up…`);
    void cleanupAll().finally(() => process.exit(130));
  });
}

const started = performance.now();
const log = (line: string) => console.error(`[${((performance.now() - started) / 1000).toFixed(1)}s] ${line}`);
const cpu = os.cpus()[0]?.model ?? "?";
console.log(
  `# rock benchmarks${quick ? " (BENCH_QUICK)" : ""} — node ${process.version}, ${os.cpus().length} × ${cpu}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB`,
);

const rBefore = rWorkerCount();
const sections: Section[] = [];
const show = (part: readonly Section[]): void => {
  for (const s of part) {
    console.log(render(s));
    sections.push(s);
  }
};
let failed = false;
try {
  if (only === "" || only === "r") show(await runRBench({ quick, log }));
  if (only === "" || only === "throughput") show(await runThroughputBench({ quick, log }));
  if (only === "" || only === "grpc") show(await runGrpcBench({ quick, log }));
  if (only === "" || only === "networks") show(await runNetworksBench({ quick, log }));
  if (only === "" || only === "observe") show(await runObserveBench({ quick, log }));
  if (only === "" || only === "cluster") show(await runClusterBench({ quick, log }));
  if (only === "" || only === "quotas") show(await runQuotasBench({ quick, log }));
  if (only === "" || only === "network") show(await runNetworkBench({ quick, log }));
  if (only === "" || only === "peers") show(await runPeersBench({ quick, log }));
  if (only === "" || only === "transfers") show(await runTransfersBench({ quick, log }));
  if (only === "" || only === "suspend") show(await runSuspendBench({ quick, log }));
  if (only === "" || only === "assign") show(await runAssignBench({ quick, log }));
  if (only === "" || only === "first") show(await runFirstCallsBench({ quick, log }));
} catch (e) {
  failed = true;
  if (!interrupted) console.error(e);
} finally {
  await cleanupAll();
}
const rAfter = rWorkerCount();
log(
  `R worker processes (src/r/process/worker.R) on this machine: ${rBefore} before the run, ${rAfter} after${rAfter > rBefore ? " — some were left behind" : ""}.`,
);
const fails = sections.flatMap((s) => s.rows.filter((r) => r.verdict === "FAIL").map((r) => `${s.title}: ${r.figure}`));
console.log(
  `\nTargets: ${sections.flatMap((s) => s.rows).filter((r) => r.verdict === "pass").length} pass, ${fails.length} fail${fails.length ? `\n  - ${fails.join("\n  - ")}` : ""}`,
);
console.log(`Done in ${((performance.now() - started) / 1000).toFixed(0)} s.`);
// Benchmarks report figures; only an error in the run itself makes the exit code non-zero.
process.exit(failed ? 1 : 0);
