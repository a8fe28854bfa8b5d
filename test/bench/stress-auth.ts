/**
 * Authentication under a flood: REST eval `1+1` latency idle, then while bad Basic credentials of
 * unknown users arrive at 16/s. The flood comes from many loopback addresses, each staying under the
 * per-address throttle's default limit, so that every attempt costs a full password check: what is
 * measured is whether those checks hold up other requests.
 */
import http from "node:http";
import { basic } from "../support/server.js";
import { HttpClient } from "./http-client.js";
import { ms, times, verdict, type Row } from "./report.js";
import { startServerProcess } from "./server-process.js";
import { sample, summarize } from "./stats.js";

const FLOOD_PER_SECOND = 16;
/** 127.0.1.1–127.0.1.64: 16/s for 12 s is 3 attempts per address, far under 10 per minute. */
const FLOOD_ADDRESSES = 64;
const FLOOD_MS = 12_000;
/** Evals measured under the flood start after its first second and stop before its last. */
const FLOOD_MARGIN_MS = 1_000;
const IDLE_EVALS = 1_000;
const WARMUP = 100;
const TARGET_RATIO = 2;

export async function authFloodRows(log: (s: string) => void): Promise<Row[]> {
  log("auth flood: starting the server process (R on boot)…");
  const server = await startServerProcess({ rStart: true });
  const client = new HttpClient(server.port, "admin");
  try {
    const session = (await client.ok("POST", "/r/sessions", {}, 201)).body.toString("utf8");
    const id = (JSON.parse(session) as { id: string }).id;
    const evalOnce = async (): Promise<void> => {
      const a = await client.request("POST", `/r/session/${id}/_eval`, {
        headers: { "content-type": "application/x-rscript", accept: "application/json" },
        body: "1+1",
      });
      if (a.status !== 200 || a.body.toString("utf8") !== "2")
        throw new Error(`eval answered ${a.status}: ${a.body.toString("utf8", 0, 300)}`);
    };

    log(`auth flood: ${IDLE_EVALS} idle evals…`);
    const idle = summarize(await sample(IDLE_EVALS, WARMUP, evalOnce));

    log(`auth flood: evals under ${FLOOD_PER_SECOND} bad logins/s for ${FLOOD_MS / 1000} s…`);
    const flood = startFlood(server.port);
    await sleep(FLOOD_MARGIN_MS);
    const underFlood: number[] = [];
    while (performance.now() - flood.started < FLOOD_MS - FLOOD_MARGIN_MS) {
      const t = performance.now();
      await evalOnce();
      underFlood.push(performance.now() - t);
    }
    const statuses = await flood.done;
    const loaded = summarize(underFlood);

    const ratio = loaded.p50 / idle.p50;
    const count = (s: number) => statuses.filter((x) => x === s).length;
    const other = statuses.length - count(401) - count(429);
    return [
      { figure: "REST eval 1+1 p50, idle", value: ms(idle.p50), reference: `p95 ${ms(idle.p95)}` },
      {
        figure: `REST eval 1+1 p50, ${FLOOD_PER_SECOND} bad logins/s`,
        value: ms(loaded.p50),
        reference: `idle ${ms(idle.p50)}`,
        ratio: times(ratio),
        target: `≤ ${TARGET_RATIO}×`,
        verdict: verdict(ratio <= TARGET_RATIO),
      },
      {
        figure: "REST eval 1+1 p95, same flood",
        value: ms(loaded.p95),
        reference: `idle ${ms(idle.p95)}`,
        ratio: times(loaded.p95 / idle.p95),
      },
      {
        figure: "bad logins answered 401 / 429 / other",
        value: `${count(401)} / ${count(429)} / ${other}`,
        reference: `${loaded.n} evals under the flood`,
      },
    ];
  } finally {
    client.close();
    await server.stop();
  }
}

/** Bad logins of distinct unknown users (no two share a check) at a steady rate, each on its own connection. */
function startFlood(port: number): { readonly started: number; readonly done: Promise<number[]> } {
  const started = performance.now();
  const done = (async () => {
    const answers: Promise<number>[] = [];
    for (let i = 0; i < (FLOOD_MS / 1000) * FLOOD_PER_SECOND; i++) {
      await sleep(started + (i * 1000) / FLOOD_PER_SECOND - performance.now());
      answers.push(badLogin(port, `127.0.1.${(i % FLOOD_ADDRESSES) + 1}`, `intruder-${i}`));
    }
    return Promise.all(answers);
  })();
  return { started, done };
}

function badLogin(port: number, from: string, user: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        localAddress: from,
        method: "GET",
        path: "/r/sessions",
        headers: { authorization: basic(user, "wrong") },
        agent: false,
      },
      (res) => {
        res.resume();
        res.once("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.once("error", () => resolve(0));
    req.end();
  });
}

function sleep(msToWait: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.max(0, msToWait)));
}
