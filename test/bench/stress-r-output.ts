/**
 * Big results and printed output through the server in its own process, over REST: a 100 MB R
 * serialization, 100 MB of JSON and 40 MB printed without a newline. Each is set beside what R alone
 * takes for the same work in the same session (serialize(), toJSON(), cat() to a file), and the rest
 * (end to end − R alone: the worker's framing, the sockets, Node, HTTP) must move ≥ 100 MB/s: a step
 * that copied the bytes so far once per chunk made it minutes (100 MB result: 225 s).
 */
import { HttpClient } from "./http-client.js";
import { mbps, mib, ms, times, verdict, type Row } from "./report.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";
import { PeakSampler } from "./stats.js";

const USER = "admin";
const RSCRIPT = "application/x-rscript";
const OCTET = "application/octet-stream";
const JSON_TYPE = "application/json";
const TARGET_MBPS = 100;
/** Printed without a newline, so the console log cuts it into lines of its bound. */
const PRINTED = 40e6;

/** Runs per figure; each reports its median. */
const RUNS = 5;

interface Measured {
  readonly bytes: number;
  readonly seconds: number;
  readonly rSeconds: number;
  /** Peak RSS of the server during the runs, over its RSS before the first step. */
  readonly rssGrowth: number;
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

class Bench {
  private readonly http: HttpClient;
  private readonly baseline: number;

  constructor(
    readonly server: ServerProcess,
    private readonly id: string,
  ) {
    this.http = new HttpClient(server.port, USER);
    this.baseline = server.rss();
  }

  static async start(): Promise<Bench> {
    const server = await startServerProcess({ rStart: true });
    try {
      const http = new HttpClient(server.port, USER);
      const created = await http.ok("POST", "/r/sessions", {}, 201).finally(() => http.close());
      return new Bench(server, (JSON.parse(created.body.toString("utf8")) as { id: string }).id);
    } catch (e) {
      await server.stop();
      throw e;
    }
  }

  async eval(script: string, accept: string): Promise<Buffer> {
    const a = await this.http.request("POST", `/r/session/${this.id}/_eval`, {
      headers: { "content-type": RSCRIPT, accept },
      body: script,
    });
    if (a.status !== 200) throw new Error(`eval answered ${a.status}: ${a.body.toString("utf8", 0, 300)}`);
    return a.body;
  }

  /** The last line of the console log. */
  async lastLogLine(): Promise<string> {
    const a = await this.http.ok("GET", "/rserver/_log?limit=1", { headers: { accept: "text/plain" } });
    return a.body.toString("utf8").replace(/\n$/, "");
  }

  /**
   * Median seconds of `work` end to end and of `rWork` inside the session (system.time), run in
   * turns, with the server's RSS sampled every 20 ms.
   */
  async measure(bytes: number, rWork: string, work: () => Promise<void>): Promise<Measured> {
    const sampler = new PeakSampler(() => this.server.rss(), 20);
    const seconds: number[] = [];
    const rSeconds: number[] = [];
    // R's garbage collector costs the next evaluation more after a 100 MB one: each timed step starts
    // from a collected heap, or the R-alone figure and the end-to-end one would not be comparable.
    const collect = () => this.eval("invisible(gc())", JSON_TYPE);
    for (let i = 0; i < RUNS; i++) {
      await collect();
      rSeconds.push(Number((await this.eval(`system.time(${rWork})[["elapsed"]]`, JSON_TYPE)).toString("utf8")));
      await collect();
      const t = performance.now();
      await work();
      seconds.push((performance.now() - t) / 1000);
    }
    return { bytes, seconds: median(seconds), rSeconds: median(rSeconds), rssGrowth: sampler.stop() - this.baseline };
  }

  async result(setup: string, rWork: string, accept: string, expected: number): Promise<Measured> {
    await this.eval(`${setup}; NULL`, JSON_TYPE);
    const m = await this.measure(expected, rWork, async () => {
      const bytes = (await this.eval("x", accept)).length;
      if (bytes !== expected) throw new Error(`the answer has ${bytes} bytes, expected ${expected}`);
    });
    await this.eval("rm(x)", JSON_TYPE);
    return m;
  }

  async printed(): Promise<Measured> {
    await this.eval(`p <- strrep("x", ${PRINTED}); NULL`, JSON_TYPE);
    let run = 0;
    const m = await this.measure(PRINTED, "{ f <- tempfile(); cat(p, file = f); unlink(f) }", async () => {
      const end = `printed-${++run}`;
      await this.eval(`cat(p, "\\n${end}\\n", sep = ""); NULL`, JSON_TYPE);
      // A plain eval answers before the log may have the last of its output.
      while ((await this.lastLogLine()) !== end) await new Promise((r) => setTimeout(r, 5));
    });
    await this.eval("rm(p)", JSON_TYPE);
    return m;
  }

  async close(): Promise<void> {
    this.http.close();
    await this.server.stop();
  }
}

function rows(what: string, rWhat: string, m: Measured): Row[] {
  const MB = m.bytes / 1e6;
  const rssTarget = 2.5 * m.bytes;
  const transport = MB / (m.seconds - m.rSeconds);
  return [
    {
      figure: `${what}: end to end`,
      value: `${ms(m.seconds * 1000)}, ${mbps(MB / m.seconds)}`,
      reference: `${rWhat} ${ms(m.rSeconds * 1000)}`,
      ratio: times(m.seconds / m.rSeconds),
    },
    {
      figure: `${what}: beyond R (end to end − R alone)`,
      value: mbps(transport),
      target: `≥ ${TARGET_MBPS} MB/s`,
      verdict: verdict(transport >= TARGET_MBPS),
    },
    {
      figure: `${what}: server RSS growth`,
      value: `+${mib(m.rssGrowth)}`,
      target: `< ${mib(rssTarget)}`,
      verdict: verdict(m.rssGrowth < rssTarget),
    },
  ];
}

/**
 * Starts a server, measures, stops it. Printed text comes first, so that its RSS figure is not what
 * the results left for the garbage collector. RSS target: under 2.5× the size. A result is held once,
 * plus what HTTP keeps while sending it; printed text is never held whole (the console log keeps 4 Mi
 * characters of it), so its peak is garbage not collected yet. Quadratic copying made that +380 MB
 * for 40 MB printed.
 */
export async function bigOutputRows(log: (s: string) => void): Promise<Row[]> {
  log("big output: starting the server process…");
  const bench = await Bench.start();
  try {
    log(`big output: 40 MB printed without a newline (${RUNS} runs)…`);
    const printed = await bench.printed();
    log(`big output: 100 MB R serialization (${RUNS} runs)…`);
    const rds = await bench.result("set.seed(1); x <- runif(12.5e6)", "serialize(x, NULL)", OCTET, 100_000_031);
    log(`big output: 100 MB of JSON (${RUNS} runs)…`);
    const json = await bench.result(
      'x <- sprintf("%098d", 1:1e6)',
      "charToRaw(enc2utf8(jsonlite::toJSON(x, auto_unbox = TRUE, null = 'null', na = 'null', digits = NA)))",
      JSON_TYPE,
      101_000_001,
    );
    return [
      ...rows("40 MB printed, no newline (eval + in the log)", "R cat() to a file", printed),
      ...rows("100 MB result, R serialization (REST, octet-stream)", "R serialize()", rds),
      ...rows("100 MB result, JSON (REST)", "R toJSON()", json),
    ];
  } finally {
    await bench.close();
  }
}
