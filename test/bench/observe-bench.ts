/**
 * What the access log and the metrics cost the request path: REST eval `1+1` on a server as it runs by
 * default (an access line per call on stderr, a pipe here as under a service manager or a container
 * runtime, and the metrics) against the same server with the log silent and the metrics off (then not
 * even the call observer runs), in rounds of fresh server processes called in turn. Beside
 * it, what the two sinks cost in this process for one call's record, the part of that difference that
 * does not drown in the machine's noise.
 */
import { pino } from "pino";
import type { CallRecord } from "../../src/interceptors/call-observer.js";
import { accessLog } from "../../src/server/access-log.js";
import { createLogger } from "../../src/server/logger.js";
import { ServiceMetrics } from "../../src/server/metrics.js";
import { ms, percent, section, verdict, type Section } from "./report.js";
import { RawHttpClient } from "./raw-http-client.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";
import { summarize } from "./stats.js";

export interface ObserveBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

const USER = "admin";
const TARGET = 0.05;
/** Off: what the default configuration is compared with. */
const UNOBSERVED = { ROCK_LOG_LEVEL: "silent", ROCK_METRICS_ENABLED: "false" };

/** One server and its session, evaluated through the minimal HTTP/1.1 client (the r-bench's target row). */
class Evaluator {
  private constructor(
    readonly server: ServerProcess,
    private readonly client: RawHttpClient,
    private readonly id: string,
  ) {}

  static async start(env: Readonly<Record<string, string>>): Promise<Evaluator> {
    const server = await startServerProcess({ rStart: true, env });
    try {
      const client = await RawHttpClient.connect(server.port, USER);
      const created = await client.request("POST", "/r/sessions", {}, "");
      if (created.status !== 201) throw new Error(`POST /r/sessions answered ${created.status}`);
      const evaluator = new Evaluator(server, client, (JSON.parse(created.body.toString("utf8")) as { id: string }).id);
      const two = (await evaluator.eval()).toString("utf8");
      if (two !== "2") throw new Error(`eval 1+1 answered ${JSON.stringify(two)}`);
      return evaluator;
    } catch (e) {
      await server.stop();
      throw e;
    }
  }

  async eval(): Promise<Buffer> {
    const a = await this.client.request(
      "POST",
      `/r/session/${this.id}/_eval`,
      { "Content-Type": "application/x-rscript", Accept: "application/json" },
      "1+1",
    );
    if (a.status !== 200) throw new Error(`eval answered ${a.status}: ${a.body.toString("utf8", 0, 300)}`);
    return a.body;
  }

  async stop(): Promise<void> {
    this.client.close();
    await this.server.stop();
  }
}

/** startServerProcess hands this process's environment to the server: `env` is set around the spawn. */
export async function runObserveBench(o: ObserveBenchOptions): Promise<Section[]> {
  const perRound = o.quick ? 1000 : 3000;
  const warmup = o.quick ? 200 : 1000;
  const rounds = o.quick ? 1 : 6;
  const on: number[] = [];
  const off: number[] = [];
  const roundRatios: number[] = [];
  for (let round = 0; round < rounds; round++) {
    o.log(
      `observe: round ${round + 1}/${rounds}: a server as configured by default and one with the log silent and the metrics off, ${perRound} evals of 1+1 each…`,
    );
    // Fresh processes every round: where the scheduler puts a server and its R session weighs on a
    // process's figures for as long as it lives (±10% here), as much as what is measured.
    const pair: Evaluator[] = [];
    try {
      for (const env of round % 2 === 0 ? [{}, UNOBSERVED] : [UNOBSERVED, {}]) pair.push(await Evaluator.start(env));
      const [a, b] = await alternate(pair, perRound, warmup);
      const [onRound, offRound] = round % 2 === 0 ? [a!, b!] : [b!, a!];
      on.push(...onRound);
      off.push(...offRound);
      roundRatios.push(summarize(onRound).p50 / summarize(offRound).p50 - 1);
    } finally {
      for (const e of pair) await e.stop();
    }
  }
  const onTimes = summarize(on);
  const offTimes = summarize(off);
  const sinks = sinkCost(o.quick ? 20_000 : 200_000);
  const overhead = onTimes.p50 / offTimes.p50 - 1;
  const s = section("Logging and metrics on the request path: REST eval 1+1, default configuration vs log silent and metrics off");
  s.rows.push(
    {
      figure: "p50, access log + metrics",
      value: ms(onTimes.p50),
      reference: `off ${ms(offTimes.p50)}`,
      ratio: signedPercent(overhead),
      target: `≤ ${percent(TARGET)}`,
      verdict: verdict(overhead <= TARGET),
    },
    {
      figure: "p95, access log + metrics",
      value: ms(onTimes.p95),
      reference: `off ${ms(offTimes.p95)}`,
      ratio: signedPercent(onTimes.p95 / offTimes.p95 - 1),
    },
    {
      figure: "mean, access log + metrics",
      value: ms(onTimes.mean),
      reference: `off ${ms(offTimes.mean)}`,
      ratio: signedPercent(onTimes.mean / offTimes.mean - 1),
    },
    {
      figure: "access line + metrics of one record, in process",
      value: ms(sinks),
      reference: `of p50 off ${ms(offTimes.p50)}`,
      ratio: signedPercent(sinks / offTimes.p50),
    },
  );
  s.notes.push(
    `${rounds} round(s), each with a fresh pair of server processes (one per configuration, one R session and one keep-alive socket each, the minimal HTTP/1.1 client): ${warmup} warm-up, then ${perRound} evals per server, one call on each in turn (the order reversed every turn), so that the machine's slow and fast phases weigh on both alike. Figures over all rounds.`,
    ...(rounds > 1
      ? [`p50 on vs off round by round: ${roundRatios.map(signedPercent).join(", ")} (how much two processes differ on this machine).`]
      : []),
    `Off: ${Object.entries(UNOBSERVED)
      .map(([k, v]) => `${k}=${v}`)
      .join(" ")}. On: the defaults, the access lines written synchronously to stderr, a pipe this process drains.`,
    "In process: the median over batches of one access line (pino, synchronous write to /dev/null) plus one record into the Prometheus counters and histograms.",
  );
  return [s];
}

/** Each evaluator's call times (ms): `count` turns, one call on each evaluator per turn, the order reversed every turn. */
async function alternate(evaluators: readonly Evaluator[], count: number, warmup: number): Promise<number[][]> {
  for (let i = 0; i < warmup; i++) for (const e of evaluators) await e.eval();
  const samples = evaluators.map(() => new Array<number>(count));
  const forward = evaluators.map((_, i) => i);
  const backward = [...forward].reverse();
  for (let turn = 0; turn < count; turn++) {
    for (const i of turn % 2 === 0 ? forward : backward) {
      const start = performance.now();
      await evaluators[i]!.eval();
      samples[i]![turn] = performance.now() - start;
    }
  }
  return samples;
}

/** Milliseconds the two sinks take for one REST Eval record, median of batches. */
function sinkCost(calls: number): number {
  const logger = createLogger({ level: "info", destination: pino.destination({ dest: "/dev/null", sync: true }) });
  const sinks = [accessLog(logger), new ServiceMetrics({ sessions: () => ({ total: 1, busy: 0, suspended: 0 }) }).recordCall];
  const record: CallRecord = {
    service: "rock.r.v1.RService",
    method: "Eval",
    protocol: "rest",
    request: "POST /r/session/0b5f3a2e-5c1d-4d8e-9f5e-2a7b1c3d4e5f/_eval",
    code: "ok",
    httpStatus: 200,
    durationMs: 0.412,
    user: USER,
    sessionId: "0b5f3a2e-5c1d-4d8e-9f5e-2a7b1c3d4e5f",
    bytesIn: 3,
    bytesOut: 1,
  };
  const batch = 1000;
  const batches: number[] = [];
  for (let done = 0; done < calls; done += batch) {
    const start = performance.now();
    for (let i = 0; i < batch; i++) for (const sink of sinks) sink(record);
    batches.push((performance.now() - start) / batch);
  }
  return summarize(batches).p50;
}

function signedPercent(x: number): string {
  return `${x >= 0 ? "+" : "−"}${Math.abs(x * 100).toFixed(1)}%`;
}
