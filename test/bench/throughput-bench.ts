/**
 * Throughput against the design's own floor: `1+1` as JSON over REST from 1 and from 4 clients at
 * once (h2load, C, one process and one session per client), on this server and on the bare relay of
 * floor-server.ts (node:http handing each body to a bare R loop of the connection's own). Besides the
 * rates, what each costs its Node process in CPU per eval, read from /proc: the server's one event
 * loop carries every client, so its CPU per eval is what bounds the rate once clients outnumber cores.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { cpuSeconds } from "../../src/r/confine/processes.js";
import { processes } from "../support/procfs.js";
import { basic } from "../support/server.js";
import { onCleanup } from "./cleanup.js";
import { startFloors } from "./floor-processes.js";
import { ensureH2load, h2loadAll, type H2Request } from "./h2load.js";
import { HttpClient } from "./http-client.js";
import { ms, perSecond, section, times, verdict, type Section } from "./report.js";
import { startServerProcess } from "./server-process.js";
import { summarize } from "./stats.js";

export interface ThroughputBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

const USER = "admin";
const CLIENTS = 4;

/** One side measured: its Node process, the R processes behind it, and one request per client. */
interface Side {
  readonly name: string;
  readonly nodePid: number;
  rPids(): number[];
  readonly requests: readonly H2Request[];
}

interface Tally {
  evals: number;
  seconds: number;
  node: number;
  r: number;
}

export async function runThroughputBench(o: ThroughputBenchOptions): Promise<Section[]> {
  const s = section(`R throughput: \`1+1\` as JSON over REST, ${CLIENTS} clients at once against 1, against the design's floor`);
  const missing = await ensureH2load();
  if (missing) {
    s.notes.push(`skipped: ${missing}`);
    return [s];
  }
  const rounds = o.quick ? 2 : 6;
  const perClient = o.quick ? 300 : 1500;
  const dir = await mkdtemp(join(tmpdir(), "rock-bench-throughput-"));
  const removeDir = onCleanup(() => rm(dir, { recursive: true, force: true }));
  o.log("throughput: starting the server and the relay floor…");
  const server = await startServerProcess({ rStart: true });
  const floors = await startFloors();
  try {
    const body = join(dir, "1+1.txt");
    await writeFile(body, "1+1");
    const http = new HttpClient(server.port, USER);
    const ids: string[] = [];
    try {
      for (let i = 0; i < CLIENTS; i++)
        ids.push((JSON.parse((await http.ok("POST", "/r/sessions", {}, 201)).body.toString("utf8")) as { id: string }).id);
    } finally {
      http.close();
    }
    const headers = { authorization: basic(USER), "content-type": "application/x-rscript", accept: "application/json" };
    const rServer = processes().find((p) => p.ppid === server.pid && p.pgrp === p.pid);
    const rock: Side = {
      name: "rock",
      nodePid: server.pid,
      rPids: () =>
        processes()
          .filter((p) => rServer !== undefined && p.pgrp === rServer.pid)
          .map((p) => p.pid),
      requests: ids.map((id) => ({ url: `http://127.0.0.1:${server.port}/r/session/${id}/_eval`, headers, body, h1: true })),
    };
    const relayRequest: H2Request = { url: `http://127.0.0.1:${floors.ports.relay}/json`, headers, body, h1: true };
    const relay: Side = {
      name: "relay",
      nodePid: floors.pid,
      rPids: () =>
        processes()
          .filter((p) => p.ppid === floors.pid)
          .map((p) => p.pid),
      requests: Array.from({ length: CLIENTS }, () => relayRequest),
    };
    const cpuOf = async (pids: number[]) => (await Promise.all(pids.map(cpuSeconds))).reduce<number>((a, b) => a + (b ?? 0), 0);
    const measure = async (side: Side, clients: number, n: number, into: Tally): Promise<number> => {
      const rPids = side.rPids();
      const [node0, r0] = [await cpuOf([side.nodePid]), await cpuOf(rPids)];
      const seconds = await h2loadAll(side.requests.slice(0, clients), n);
      into.evals += clients * n;
      into.seconds += seconds;
      into.node += (await cpuOf([side.nodePid])) - node0;
      into.r += (await cpuOf(rPids)) - r0;
      return (clients * n) / seconds;
    };
    const tally = (): Tally => ({ evals: 0, seconds: 0, node: 0, r: 0 });
    const sides = [rock, relay];
    const one = new Map(sides.map((x) => [x, tally()]));
    const four = new Map(sides.map((x) => [x, tally()]));
    const scaling = new Map(sides.map((x) => [x, [] as number[]]));
    o.log("throughput: warm-up…");
    for (const side of sides) await measure(side, CLIENTS, Math.min(300, perClient), tally());
    // Rounds of 1 client then 4 on each side, the side that goes first changing every round: a slow
    // minute of this VM weighs on both sides and on both client counts alike.
    for (let r = 0; r < rounds; r++) {
      o.log(`throughput: round ${r + 1} of ${rounds}…`);
      for (const side of r % 2 === 0 ? sides : [...sides].reverse()) {
        const rate1 = await measure(side, 1, perClient, one.get(side)!);
        const rate4 = await measure(side, CLIENTS, perClient, four.get(side)!);
        scaling.get(side)!.push(rate4 / rate1);
      }
    }
    const rate = (x: Tally) => x.evals / x.seconds;
    const cpuPerEval = (x: Tally, what: "node" | "r") => (x[what] / x.evals) * 1000;
    const share = (x: Tally, what: "node" | "r") => `${((x[what] / x.seconds) * 100).toFixed(0)}%`;
    const median = (side: Side) => summarize(scaling.get(side)!).p50;
    const [r1, r4, f1, f4] = [one.get(rock)!, four.get(rock)!, one.get(relay)!, four.get(relay)!];
    const cpuRatio1 = cpuPerEval(r1, "node") / cpuPerEval(f1, "node");
    const cpuRatio4 = cpuPerEval(r4, "node") / cpuPerEval(f4, "node");
    s.rows.push(
      { figure: "1 client", value: perSecond(rate(r1)), reference: `floor ${perSecond(rate(f1))}`, ratio: times(rate(r1) / rate(f1)) },
      {
        figure: `${CLIENTS} clients`,
        value: perSecond(rate(r4)),
        reference: `floor ${perSecond(rate(f4))}`,
        ratio: times(rate(r4) / rate(f4)),
      },
      {
        figure: `${CLIENTS} clients against 1, median of ${rounds} rounds`,
        value: times(median(rock)),
        reference: `floor ${times(median(relay))}`,
        target: "≥ 1.8×",
        verdict: verdict(median(rock) >= 1.8),
      },
      {
        figure: `${CLIENTS} clients against 1, by round`,
        value: scaling.get(rock)!.map(times).join(" "),
        reference: `floor ${scaling.get(relay)!.map(times).join(" ")}`,
      },
      // Issue 40's bound, at one client and at four.
      {
        figure: "Node process CPU per eval, 1 client",
        value: ms(cpuPerEval(r1, "node")),
        reference: `floor ${ms(cpuPerEval(f1, "node"))}`,
        ratio: times(cpuRatio1),
        target: "≤ 2× floor",
        verdict: verdict(cpuRatio1 <= 2),
      },
      {
        figure: `Node process CPU per eval, ${CLIENTS} clients`,
        value: ms(cpuPerEval(r4, "node")),
        reference: `floor ${ms(cpuPerEval(f4, "node"))}`,
        ratio: times(cpuRatio4),
        target: "≤ 2× floor",
        verdict: verdict(cpuRatio4 <= 2),
      },
      {
        figure: `R CPU per eval, 1 / ${CLIENTS} clients`,
        value: `${ms(cpuPerEval(r1, "r"))} / ${ms(cpuPerEval(r4, "r"))}`,
        reference: `floor ${ms(cpuPerEval(f1, "r"))} / ${ms(cpuPerEval(f4, "r"))}`,
      },
      {
        figure: `share of one core at ${CLIENTS} clients: Node / R`,
        value: `${share(r4, "node")} / ${share(r4, "r")}`,
        reference: `floor ${share(f4, "node")} / ${share(f4, "r")}`,
      },
    );
    s.notes.push(
      `${rounds} rounds; in each, per side, 1 h2load process of ${perClient} requests, then ${CLIENTS} at once of ${perClient} each (-c1 -m1, HTTP/1.1 kept alive; rock: a session per client). ${cpus().length} CPU cores hold the clients, the Node process and the R processes.`,
    );
    s.notes.push(
      "floor: test/bench/floor-server.ts's relay, a bare node:http server handing each body to a bare R loop of its connection's own (readBin, parse, eval, the value as JSON text, writeBin). CPU: utime + stime from /proc/<pid>/stat over the measured runs, the Node process alone and its R processes apart.",
    );
  } finally {
    await floors.stop();
    await server.stop();
    await removeDir();
  }
  return [s];
}
