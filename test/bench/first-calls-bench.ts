/**
 * The first calls (issue 30, point 5): what one keep-alive client meets right after a start, and after
 * the server stayed idle. Fresh servers with the warm-up (server.warmUpCalls, its default) and without
 * it, in turn; each is timed from its start to /_check answering 200, then one session is opened and
 * test/bench/keepalive-calls.c (a C client, one connection) evaluates `1+1` as JSON through REST: 20
 * calls, 200, 3,000 (the last 200 of them are the server's warm figure, the reference), 5 s without a
 * call, 20 more. The same client against the bare relay of floor-server.ts (node:http → a bare R loop)
 * tells what an idle machine adds to a first call without any of this server's code.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { onCleanup } from "./cleanup.js";
import { startFloors } from "./floor-processes.js";
import { ms, section, times, verdict, type Row, type Section } from "./report.js";
import { ROOT, startServerProcess } from "./server-process.js";

const run = promisify(execFile);

export interface FirstCallsBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

/** The client's plan: steps 0, 1, 2 (calls), 3 (the idle pause), 4 (calls). */
const IDLE_MS = 5000;
const PLAN = `20,200,3000,p${IDLE_MS},20`;

/** One client's run, milliseconds per call. */
interface Calls {
  readonly first20: number;
  readonly next200: number;
  readonly warm: number;
  readonly afterIdle20: number;
  readonly firstAfterIdle: number;
}

/** One start of a server: its time to ready, and its calls. */
interface Start {
  readonly readyMs: number;
  readonly calls: Calls;
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function runFirstCallsBench(o: FirstCallsBenchOptions): Promise<Section[]> {
  const s = section("The first calls: one keep-alive client after a start and after 5 s idle, REST eval `1+1` as JSON");
  const starts = o.quick ? 1 : 3;
  const dir = mkdtempSync(join(tmpdir(), "rock-bench-first-"));
  onCleanup(async () => rmSync(dir, { recursive: true, force: true }));
  const client = join(dir, "keepalive-calls");
  await run("cc", ["-O2", "-o", client, join(ROOT, "test/bench/keepalive-calls.c")]);
  const calls = async (port: number, request: string): Promise<Calls> => {
    const file = join(dir, `request-${port}`);
    writeFileSync(file, request);
    const { stdout } = await run(client, ["127.0.0.1", String(port), file, PLAN], { timeout: 5 * 60_000, maxBuffer: 1 << 24 });
    const steps = new Map<number, number[]>();
    for (const line of stdout.trim().split("\n")) {
      const [step, ns] = line.split(" ").map(Number) as [number, number];
      const times = steps.get(step) ?? [];
      times.push(ns / 1e6);
      steps.set(step, times);
    }
    const step = (n: number): number[] => steps.get(n) ?? [];
    return {
      first20: median(step(0)),
      next200: median(step(1)),
      warm: median(step(2).slice(-200)),
      afterIdle20: median(step(4)),
      firstAfterIdle: step(4)[0]!,
    };
  };

  const withWarmUp: Start[] = [];
  const without: Start[] = [];
  for (let i = 0; i < starts; i++) {
    // Each kind goes first every other round: a slow minute of this shared VM lands on both alike.
    const order = i % 2 === 0 ? [true, false] : [false, true];
    for (const warmUp of order) {
      o.log(`first calls: a fresh server ${warmUp ? "with" : "without"} its warm-up (${i + 1}/${starts})`);
      const started = performance.now();
      const server = await startServerProcess({ rStart: true, env: warmUp ? {} : { ROCK_WARM_UP_CALLS: "0" } });
      const readyMs = performance.now() - started;
      try {
        const auth = `Basic ${Buffer.from("admin:admin").toString("base64")}`;
        const { stdout } = await run("curl", [
          "-sS",
          "-H",
          `Authorization: ${auth}`,
          "-X",
          "POST",
          `http://127.0.0.1:${server.port}/r/sessions`,
        ]);
        const id = (JSON.parse(stdout) as { id: string }).id;
        const request =
          `POST /r/session/${id}/_eval HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${auth}\r\n` +
          "Content-Type: application/x-rscript\r\nAccept: application/json\r\nContent-Length: 3\r\n\r\n1+1";
        (warmUp ? withWarmUp : without).push({ readyMs, calls: await calls(server.port, request) });
      } finally {
        await server.stop();
      }
    }
  }
  o.log("first calls: the bare relay (node:http → a bare R loop)");
  const floors = await startFloors();
  let bare: Calls;
  try {
    bare = await calls(floors.ports.relay, "POST /json HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\n1+1");
  } finally {
    await floors.stop();
  }

  const m = (xs: readonly Start[], f: (c: Calls) => number): number => median(xs.map((x) => f(x.calls)));
  /** One step's median over `starts` against their warm median; with `most`, the target of the ratio. */
  const row = (figure: string, starts: readonly Start[], pick: (c: Calls) => number, most?: number): Row => {
    const value = m(starts, pick);
    const warm = m(starts, (c) => c.warm);
    const ratio = value / warm;
    const target = most === undefined ? {} : { target: `≤ ${most}×`, verdict: verdict(ratio <= most) };
    return { figure, value: ms(value), reference: `warm ${ms(warm)}`, ratio: times(ratio), ...target };
  };
  const idle = `${IDLE_MS / 1000} s idle`;
  s.rows.push(
    row("first 20 evals after a start, p50", withWarmUp, (c) => c.first20, 2),
    row("the same without the warm-up (server.warmUpCalls 0)", without, (c) => c.first20),
    row("next 200 evals, p50", withWarmUp, (c) => c.next200),
    row("the same without the warm-up", without, (c) => c.next200),
    row(`20 evals after ${idle}, p50`, withWarmUp, (c) => c.afterIdle20, 1.3),
    row(`the first eval after ${idle}`, withWarmUp, (c) => c.firstAfterIdle),
    row(`bare relay: the first call after ${idle}`, [{ readyMs: 0, calls: bare }], (c) => c.firstAfterIdle),
    {
      figure: "start to /_check 200",
      value: ms(median(withWarmUp.map((x) => x.readyMs))),
      reference: `without the warm-up ${ms(median(without.map((x) => x.readyMs)))}`,
      ratio: times(median(withWarmUp.map((x) => x.readyMs)) / median(without.map((x) => x.readyMs))),
    },
  );
  s.notes.push(
    `Medians over ${starts} fresh servers of each kind (compiled, R started at boot, 8 spare sessions), in turn; each figure is the median of the calls of one step, its ratio against the same server's warm p50 (the last 200 of 3,000 calls).`,
    "Client: test/bench/keepalive-calls.c, one HTTP/1.1 connection for every step. The bare relay is floor-server.ts's (node:http handing the body to a bare R loop): its first call after the pause is what waking an idle machine's two processes costs without this server's code.",
    `Each start's first 20 / warm (ms), with the warm-up: ${withWarmUp.map((x) => `${x.calls.first20.toFixed(2)} / ${x.calls.warm.toFixed(2)}`).join(", ")}; without: ${without.map((x) => `${x.calls.first20.toFixed(2)} / ${x.calls.warm.toFixed(2)}`).join(", ")}.`,
  );
  return [s];
}
