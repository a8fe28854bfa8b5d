/**
 * This server beside the other ways of serving R over a network, each started by the bench on
 * loopback: Rserve (QAP1), plumber (an endpoint evaluating the posted code, answered with
 * jsonlite::toJSON) and OpenCPU (ocpu_start_server). The same R work on each: `1+1` and
 * `as.list(summary(1:1e6))` as JSON, a 100,000-row data.frame as JSON, a stateful pair where the peer
 * keeps state, session open and close where it has sessions, `1+1` with 1 and 4 clients. C clients
 * where the requests are fixed (h2load for HTTP, test/bench/qap-load.c for Rserve); a peer that cannot
 * be installed or started is skipped with its reason.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { basic } from "../support/server.js";
import { onCleanup } from "./cleanup.js";
import { benchRLibrary, ensureCran, ensureDebian, hasCommand } from "./debian.js";
import { ensureH2load, h2load, h2loadAll, type H2Request } from "./h2load.js";
import { HttpClient } from "./http-client.js";
import { RawHttpClient } from "./raw-http-client.js";
import { ms, perSecond, section, times, type Row, type Section } from "./report.js";
import { freePort, QapClient, RserveProcess } from "./rserve-client.js";
import { ROOT, startServerProcess } from "./server-process.js";
import { summarize } from "./stats.js";

const run = promisify(execFile);
const USER = "admin";
const TO_JSON = "auto_unbox = TRUE, null = 'null', na = 'null', digits = NA";
const DF = "set.seed(1); df <- data.frame(a = 1:1e5, b = rnorm(1e5), c = sample(letters, 1e5, TRUE))";
const SUMMARY = "as.list(summary(1:1e6))";
/** Two significant digits below 0.1×: against OpenCPU "0.00×" would say nothing. */
const ratio = (x: number) => (x >= 0.1 ? times(x) : `${x.toPrecision(2)}×`);

export interface PeersBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

type PeerName = "rock" | "Rserve" | "plumber" | "OpenCPU";
type RowName = "one" | "summary" | "df" | "pair" | "session" | "clients1" | "clients4";

/** One peer: how each row's work is measured on it, as seconds per request or requests per second. */
interface Peer {
  readonly name: PeerName;
  /** Seconds per request (per pair, per open + close), or requests per second for the clients rows. */
  readonly rows: Partial<Record<RowName, (n: number) => Promise<number>>>;
  /** Requests per round of each row: a slow peer gets fewer, so that a round takes seconds, not minutes. */
  readonly counts: Partial<Record<RowName, number>>;
  /** The answer each row gives, checked before anything is timed; `firstRow`: the df's first row as rock gives it. */
  readonly check: (firstRow: string) => Promise<void>;
  /** What the peer cannot do, said in its row instead of a figure. */
  readonly lacks?: Partial<Record<RowName, string>>;
  stop(): Promise<void>;
}

export async function runPeersBench(o: PeersBenchOptions): Promise<Section[]> {
  const s = section("R over the network: this server vs Rserve, plumber and OpenCPU, on loopback");
  const rounds = 3;
  const scale = o.quick ? 0.25 : 1;
  const count = (n: number) => Math.max(2, Math.round(n * scale));
  const h2 = await ensureH2load();
  if (h2) {
    s.notes.push(`skipped: ${h2}`);
    return [s];
  }
  const dir = await mkdtemp(join(tmpdir(), "rock-bench-peers-"));
  const removeDir = onCleanup(() => rm(dir, { recursive: true, force: true }));
  const peers: Peer[] = [];
  const skipped: string[] = [];
  const skip = (name: string, why: string) => {
    o.log(`peers: ${name} skipped: ${why}`);
    skipped.push(`${name} skipped: ${why}`);
  };
  try {
    const files = new BodyFiles(dir);
    o.log("peers: this server…");
    peers.push(await rockPeer(files, count));

    o.log("peers: Rserve…");
    const rserveMissing =
      (await ensureDebian("Rserve", ["r-cran-rserve"])) ??
      (await ensureDebian("a C compiler for the QAP1 load client", ["gcc", "libc6-dev"], () => hasCommand("cc")));
    if (rserveMissing) skip("Rserve", rserveMissing);
    else {
      try {
        peers.push(await rservePeer(dir, count));
      } catch (e) {
        skip("Rserve", `did not start: ${(e as Error).message.slice(0, 300)}`);
      }
    }

    o.log("peers: plumber…");
    const plumberMissing = await ensureDebian("plumber", ["r-cran-plumber"]);
    if (plumberMissing) skip("plumber", plumberMissing);
    else {
      try {
        peers.push(await plumberPeer(dir, files, count));
      } catch (e) {
        skip("plumber", `did not start: ${(e as Error).message.slice(0, 300)}`);
      }
    }

    o.log("peers: OpenCPU (installed into the bench's own R library the first time)…");
    const lib = await benchRLibrary();
    const ocpuMissing =
      (await ensureDebian("OpenCPU's dependencies", [
        "r-cran-httpuv",
        "r-cran-knitr",
        "r-cran-webutils",
        "r-cran-zip",
        "r-cran-brew",
        "r-cran-rappdirs",
        "r-cran-evaluate",
        "r-cran-remotes",
        "r-cran-sys",
        "r-cran-curl",
        "r-cran-openssl",
        "r-cran-mime",
        "r-cran-rlang",
        "r-cran-vctrs",
        "r-cran-rcpp",
        "libprotobuf-dev",
        "protobuf-compiler",
      ])) ?? (await ensureCran("OpenCPU", lib, ["protolite", "unix", "opencpu"], ["unix", "opencpu"]));
    if (ocpuMissing) skip("OpenCPU", ocpuMissing);
    else {
      try {
        peers.push(await openCpuPeer(dir, lib, files, count));
      } catch (e) {
        skip("OpenCPU", `did not start: ${(e as Error).message.slice(0, 300)}`);
      }
    }

    const firstRow = (peers[0] as Peer & { firstRow: string }).firstRow;
    for (const p of peers) await p.check(firstRow);
    const order: RowName[] = ["one", "summary", "df", "pair", "session", "clients1", "clients4"];
    o.log("peers: one unmeasured pass of every row…");
    for (const row of order) for (const p of peers) await p.rows[row]?.(Math.max(1, Math.ceil((p.counts[row] ?? 1) / 10)));
    const got = new Map<string, number[]>();
    for (let r = 0; r < rounds; r++) {
      o.log(`peers: round ${r + 1} of ${rounds}…`);
      for (const row of order) {
        // Each peer goes first in turn: a slow minute of this shared VM lands on all of them alike.
        const turn = peers.map((_, i) => peers[(i + r) % peers.length]!);
        for (const p of turn) {
          const work = p.rows[row];
          if (!work) continue;
          const key = `${p.name}/${row}`;
          got.set(key, [...(got.get(key) ?? []), await work(p.counts[row] ?? 1)]);
        }
      }
    }
    const median = (peer: PeerName, row: RowName) => {
      const xs = got.get(`${peer}/${row}`);
      return xs ? summarize(xs).p50 : undefined;
    };
    const others = peers.filter((p) => p.name !== "rock");
    const latencyRows = (row: RowName, figure: string) => {
      const ours = median("rock", row)!;
      for (const p of others) {
        const theirs = median(p.name, row);
        s.rows.push(
          theirs === undefined
            ? { figure: `${figure} — ${p.name}`, value: ms(ours * 1000), reference: `${p.name}: ${p.lacks?.[row] ?? "n/a"}` }
            : {
                figure: `${figure} — ${p.name}`,
                value: ms(ours * 1000),
                reference: `${p.name} ${ms(theirs * 1000)}`,
                ratio: ratio(ours / theirs),
              },
        );
      }
    };
    latencyRows("one", "`1+1` as JSON, 1 client");
    latencyRows("summary", "`as.list(summary(1:1e6))` as JSON");
    latencyRows("df", "100,000-row data.frame as JSON");
    latencyRows("pair", "stateful pair `x <- rnorm(1e5)` then `mean(x)`");
    latencyRows("session", "session open + close");
    const rateRow = (p: Peer | undefined): Row => {
      const name = p?.name ?? "rock";
      const one = median(name, "clients1")!;
      const four = median(name, "clients4")!;
      return {
        figure: `\`1+1\` as JSON, 1 / 4 clients — ${name}`,
        value: `${perSecond(one)} / ${perSecond(four)}`,
        ratio: times(four / one),
        reference: name === "rock" ? "4 clients vs 1 →" : `rock 4 clients ÷ ${name}'s: ${times(median("rock", "clients4")! / four)}`,
      };
    };
    s.rows.push(rateRow(undefined), ...others.map((p) => rateRow(p)));
    s.notes.push(
      `Medians of ${rounds} rounds after one unmeasured pass, each peer first in turn; times are the wall time of a run of calls divided by its calls; calls per round, rows in table order (the 4 clients' row: each client's): rock ${countsOf(peers, "rock")}; Rserve ${countsOf(peers, "Rserve")}; plumber ${countsOf(peers, "plumber")}; OpenCPU ${countsOf(peers, "OpenCPU")}.`,
      "Session open + close: back to back, so this is a mean over cycles that include waiting for the forks of spare sessions once the spares are taken (rock: POST /r/sessions then DELETE, node:http client; Rserve: connect, read its ID, close); the r section gives the p50s.",
      "Clients: h2load (C, HTTP/1.1) for the fixed requests on rock, plumber and OpenCPU, test/bench/qap-load.c (C, QAP1) for Rserve; the stateful pair and session open + close, whose second call depends on the first answer, with the bench's minimal Node clients on every side (a minimal HTTP/1.1 client, the minimal QAP1 client). 4 clients: 4 client processes (Rserve: 4 threads) at once, each with its own session or connection where the peer has them.",
      "The same R on every side: rock and plumber evaluate the posted script and answer jsonlite::toJSON(value, auto_unbox = TRUE, null = 'null', na = 'null', digits = NA); Rserve evaluates that toJSON call (CMD_eval); OpenCPU calls base::identity with the code as its argument and answers /json?auto_unbox=true&digits=NA&pretty=false. The data.frame is built beforehand where each peer keeps objects: in the rock session, in each Rserve connection, in plumber's global environment, in an OpenCPU session (read back as /ocpu/tmp/{key}/R/.val/json).",
      "Stateful pair: rock's session and Rserve's connection keep `x`; plumber keeps it in its one global environment, shared by every client; OpenCPU stores each call's value under a key (POST stats::rnorm(n = 1e5), then POST base::mean(x = key)).",
      "plumber and OpenCPU (both on httpuv) get a new connection per request: httpuv writes an answer's header and body in two writes, so on a kept-alive connection every answer waits for the client's delayed ACK (~40 ms; plumber's `1+1` kept alive is shown apart). rock and Rserve keep their connections.",
    );
    const fresh = median("plumber", "one");
    const plumber = peers.find((p) => p.name === "plumber") as (Peer & { keepAlive?: (n: number) => Promise<number> }) | undefined;
    if (plumber?.keepAlive && fresh !== undefined)
      s.rows.push({
        figure: "plumber `1+1`, connection kept alive (httpuv's delayed ACK)",
        value: ms((await plumber.keepAlive(count(20))) * 1000),
        reference: `new connection each: ${ms(fresh * 1000)}`,
      });
    for (const line of skipped) s.notes.push(line);
  } finally {
    for (const p of peers.reverse()) await p.stop().catch(() => undefined);
    await removeDir();
  }
  return [s];
}

function countsOf(peers: Peer[], name: PeerName): string {
  const p = peers.find((x) => x.name === name);
  if (!p) return "skipped";
  return Object.values(p.counts).join("/");
}

/** Request bodies in files, for h2load's -d. */
class BodyFiles {
  private n = 0;
  constructor(private readonly dir: string) {}
  async of(text: string): Promise<string> {
    const file = join(this.dir, `body-${this.n++}.txt`);
    await writeFile(file, text);
    return file;
  }
}

/** Seconds per request of `n` requests from 1 client; requests per second from `clients` at once. */
const perCall = async (q: H2Request, n: number) => (await h2load(q, n)).seconds / n;
const rate = async (qs: readonly H2Request[], n: number) => (qs.length * n) / (await h2loadAll(qs, n));

/**
 * The rows whose requests are fixed, measured alike on every HTTP peer: `1+1`, the summary and the
 * data.frame per call, and `1+1` from 1 and 4 clients (`fours`: one request per client, where the peer
 * has sessions).
 */
function fixedRows(one: H2Request, summary: H2Request, df: H2Request, fours = [one, one, one, one]): Peer["rows"] {
  return {
    one: (n) => perCall(one, n),
    summary: (n) => perCall(summary, n),
    df: (n) => perCall(df, n),
    clients1: (n) => rate([one], n),
    clients4: (n) => rate(fours, n),
  };
}

/** Seconds per run of `work`, over `n` runs one after the other. */
async function sequential(n: number, work: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  for (let i = 0; i < n; i++) await work();
  return (performance.now() - t) / 1000 / n;
}

function expectJson(got: string, want: unknown, what: string): void {
  const norm = (x: unknown) => JSON.stringify(Array.isArray(x) && x.length === 1 ? x[0] : x);
  let parsed: unknown;
  try {
    parsed = JSON.parse(got);
  } catch {
    throw new Error(`${what}: not JSON: ${got.slice(0, 200)}`);
  }
  if (norm(parsed) !== norm(want)) throw new Error(`${what}: expected ${norm(want)}, got ${got.slice(0, 200)}`);
}

const SUMMARY_JSON = { "Min.": 1, "1st Qu.": 250000.75, Median: 500000.5, Mean: 500000.5, "3rd Qu.": 750000.25, "Max.": 1000000 };

/** The df's JSON has one object per row; its first row is the same on every side (set.seed(1)). */
function expectDf(got: string, what: string, first: string): void {
  const rows = JSON.parse(got) as unknown[];
  if (!Array.isArray(rows) || rows.length !== 1e5) throw new Error(`${what}: expected 100,000 rows, got ${got.slice(0, 200)}`);
  if (JSON.stringify(rows[0]) !== first) throw new Error(`${what}: first row ${JSON.stringify(rows[0])}, expected ${first}`);
}

// ---- rock ----

/** This server and Rserve answer in microseconds to milliseconds: the same calls per round for both. */
function fastCounts(count: (n: number) => number): Peer["counts"] {
  return {
    one: count(1000),
    summary: count(30),
    df: count(6),
    pair: count(60),
    session: count(40),
    clients1: count(1000),
    clients4: count(500),
  };
}

async function rockPeer(files: BodyFiles, count: (n: number) => number): Promise<Peer & { firstRow: string }> {
  const server = await startServerProcess({ rStart: true });
  const http = new HttpClient(server.port, USER);
  const stop = async () => {
    http.close();
    await server.stop();
  };
  try {
    const eval_ = (id: string, script: string) =>
      http.ok("POST", `/r/session/${id}/_eval`, {
        headers: { "content-type": "application/x-rscript", accept: "application/json" },
        body: script,
      });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++)
      ids.push((JSON.parse((await http.ok("POST", "/r/sessions", {}, 201)).body.toString("utf8")) as { id: string }).id);
    await eval_(ids[0]!, `${DF}; NULL`);
    const firstRow = JSON.stringify((JSON.parse((await eval_(ids[0]!, "df[1, ]")).body.toString("utf8")) as unknown[])[0]);
    const base = `http://127.0.0.1:${server.port}`;
    const headers = { authorization: basic(USER), "content-type": "application/x-rscript", accept: "application/json" };
    const evalOn = async (id: string, script: string): Promise<H2Request> => ({
      url: `${base}/r/session/${id}/_eval`,
      headers,
      h1: true,
      body: await files.of(script),
    });
    const one = await evalOn(ids[0]!, "1+1");
    const summary = await evalOn(ids[0]!, SUMMARY);
    const df = await evalOn(ids[0]!, "df");
    const fours = await Promise.all(ids.map((id) => evalOn(id, "1+1")));
    const raw = await RawHttpClient.connect(server.port, USER);
    const rawEval = async (script: string) => {
      const a = await raw.request(
        "POST",
        `/r/session/${ids[0]}/_eval`,
        { "Content-Type": "application/x-rscript", Accept: "application/json" },
        script,
      );
      if (a.status !== 200) throw new Error(`rock eval answered ${a.status}: ${a.body.toString("utf8", 0, 200)}`);
      return a.body.toString("utf8");
    };
    return {
      name: "rock",
      firstRow,
      counts: fastCounts(count),
      rows: {
        ...fixedRows(one, summary, df, fours),
        pair: (n) =>
          sequential(n, async () => {
            await rawEval("x <- rnorm(1e5); NULL");
            await rawEval("mean(x)");
          }),
        session: (n) =>
          sequential(n, async () => {
            const id = (JSON.parse((await http.ok("POST", "/r/sessions", {}, 201)).body.toString("utf8")) as { id: string }).id;
            await http.ok("DELETE", `/r/session/${id}`);
          }),
      },
      check: async () => {
        expectJson((await eval_(ids[0]!, "1+1")).body.toString("utf8"), 2, "rock 1+1");
        expectJson((await eval_(ids[0]!, SUMMARY)).body.toString("utf8"), SUMMARY_JSON, "rock summary");
        expectDf((await eval_(ids[0]!, "df")).body.toString("utf8"), "rock df", firstRow);
        await rawEval("x <- rnorm(1e5); NULL");
        if (Math.abs(Number(JSON.parse(await rawEval("mean(x)")))) > 0.05) throw new Error("rock mean(x) is not near 0");
      },
      stop: async () => {
        raw.close();
        await stop();
      },
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

// ---- Rserve ----

async function rservePeer(dir: string, count: (n: number) => number): Promise<Peer> {
  const load = join(dir, "qap-load");
  await run("cc", ["-O2", "-pthread", "-o", load, join(ROOT, "test/bench/qap-load.c")]);
  const rserve = await RserveProcess.start();
  const stop = onCleanup(() => rserve.stop());
  try {
    const json = (expr: string) => `jsonlite::toJSON(${expr}, ${TO_JSON})`;
    const qap = async (n: number, clients: number, setup: string, expr: string) => {
      const { stdout } = await run(load, [String(rserve.port), "eval", String(n), String(clients), setup, expr], { timeout: 10 * 60_000 });
      return JSON.parse(stdout) as { requests: number; seconds: number };
    };
    const node = await QapClient.connect(rserve.port);
    // as.character(): one string with no attributes, an XT_ARRAY_STR after the two 4-byte headers,
    // NUL-terminated and padded with \x01.
    const text = async (expr: string) =>
      (await node.eval(`as.character(${expr})`)).payload
        .subarray(8)
        .toString("utf8")
        // biome-ignore lint/suspicious/noControlCharactersInRegex: QAP pads strings with NUL and 0x01
        .replace(/[\0\x01]+$/, "");
    return {
      name: "Rserve",
      counts: fastCounts(count),
      rows: {
        one: async (n) => (await qap(n, 1, "", json("1+1"))).seconds / n,
        summary: async (n) => (await qap(n, 1, "", json(SUMMARY))).seconds / n,
        df: async (n) => (await qap(n, 1, DF, json("df"))).seconds / n,
        pair: (n) =>
          sequential(n, async () => {
            await node.eval("x <- rnorm(1e5); NULL");
            await node.eval(json("mean(x)"));
          }),
        session: (n) =>
          sequential(n, async () => {
            const c = await QapClient.connect(rserve.port);
            await c.close();
          }),
        clients1: async (n) => {
          const r = await qap(n, 1, "", json("1+1"));
          return r.requests / r.seconds;
        },
        clients4: async (n) => {
          const r = await qap(n, 4, "", json("1+1"));
          return r.requests / r.seconds;
        },
      },
      check: async (firstRow) => {
        expectJson(await text(json("1+1")), 2, "Rserve 1+1");
        expectJson(await text(json(SUMMARY)), SUMMARY_JSON, "Rserve summary");
        await node.eval(`${DF}; NULL`);
        expectDf(await text(json("df")), "Rserve df", firstRow);
      },
      stop: async () => {
        await node.close();
        await stop();
      },
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

// ---- R peers on HTTP: plumber and OpenCPU ----

/** An R process serving HTTP, in its own process group, with its own temporary folder. */
async function startR(
  dir: string,
  name: string,
  script: string,
  probe: string,
  env: Record<string, string> = {},
): Promise<{ port: number; stop: () => Promise<void> }> {
  const port = await freePort();
  const tmp = await mkdtemp(join(dir, `${name}-tmp-`));
  const file = join(dir, `${name}.R`);
  await writeFile(file, script.replaceAll("@PORT@", String(port)));
  // TMPDIR: an R killed by a signal leaves its session folder behind; this one goes with the bench's.
  const child: ChildProcess = spawn("Rscript", ["--no-save", file], {
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, TMPDIR: tmp, ...env },
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not spawn Rscript for ${name}`);
  let log = "";
  for (const stream of [child.stdout, child.stderr]) {
    stream?.setEncoding("utf8");
    stream?.on("data", (t: string) => (log = (log + t).slice(-3000)));
  }
  const killGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-pid, signal);
    } catch {
      // the group is empty
    }
  };
  const onExit = () => killGroup("SIGKILL");
  process.once("exit", onExit);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = onCleanup(async () => {
    process.off("exit", onExit);
    if (child.exitCode === null && child.signalCode === null) {
      killGroup("SIGTERM");
      const timer = setTimeout(() => killGroup("SIGKILL"), 3000);
      await exited;
      clearTimeout(timer);
    }
    // Forks of the server (OpenCPU evaluates each call in one) that outlived it.
    killGroup("SIGKILL");
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`${name} exited (${child.exitCode}): ${log}`);
    }
    try {
      await run("curl", ["-sS", "-o", "/dev/null", "--fail", "--max-time", "5", `http://127.0.0.1:${port}${probe}`]);
      break;
    } catch {
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`${name} did not answer on port ${port}: ${log}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return { port, stop };
}

/** One request on a connection of its own (the way plumber and OpenCPU are measured, see the notes). */
async function once(port: number, method: string, path: string, headers: Record<string, string>, body: string): Promise<string> {
  const c = await RawHttpClient.connect(port, USER);
  try {
    const a = await c.request(method, path, { ...headers, Connection: "close" }, body);
    if (a.status < 200 || a.status > 299) throw new Error(`${method} ${path} answered ${a.status}: ${a.body.toString("utf8", 0, 300)}`);
    return a.body.toString("utf8");
  } finally {
    c.close();
  }
}

async function plumberPeer(
  dir: string,
  files: BodyFiles,
  count: (n: number) => number,
): Promise<Peer & { keepAlive: (n: number) => Promise<number> }> {
  const script = `
suppressMessages(library(plumber))
${DF}
handler <- function(req, res) {
  value <- eval(parse(text = rawToChar(req$bodyRaw)), envir = globalenv())
  res$setHeader("Content-Type", "application/json")
  res$body <- as.character(jsonlite::toJSON(value, ${TO_JSON}))
  res
}
router <- pr_get(pr_post(pr(), "/eval", handler), "/ready", function() "ok")
pr_run(router, host = "127.0.0.1", port = @PORT@, docs = FALSE, quiet = TRUE)
`;
  const { port, stop } = await startR(dir, "plumber", script, "/ready");
  try {
    const url = `http://127.0.0.1:${port}/eval`;
    const headers = { "content-type": "text/plain" };
    const request = async (code: string): Promise<H2Request> => ({ url, headers, body: await files.of(code), h1: true, close: true });
    const one = await request("1+1");
    const summary = await request(SUMMARY);
    const df = await request("df");
    const post = (code: string) => once(port, "POST", "/eval", { "Content-Type": "text/plain" }, code);
    return {
      name: "plumber",
      counts: { one: count(300), summary: count(30), df: count(6), pair: count(60), clients1: count(300), clients4: count(150) },
      rows: {
        ...fixedRows(one, summary, df),
        pair: (n) =>
          sequential(n, async () => {
            await post("x <- rnorm(1e5); NULL");
            await post("mean(x)");
          }),
      },
      lacks: { session: "no sessions: one R process and one global environment serve every client" },
      keepAlive: (n) => perCall({ ...one, close: false, h1: true }, n),
      check: async (firstRow) => {
        expectJson(await post("1+1"), 2, "plumber 1+1");
        expectJson(await post(SUMMARY), SUMMARY_JSON, "plumber summary");
        expectDf(await post("df"), "plumber df", firstRow);
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

async function openCpuPeer(dir: string, lib: string, files: BodyFiles, count: (n: number) => number): Promise<Peer> {
  const script = `
.libPaths(c(${JSON.stringify(lib)}, .libPaths()))
opencpu::ocpu_start_server(port = @PORT@, preload = "jsonlite")
`;
  const { port, stop } = await startR(dir, "opencpu", script, "/ocpu/info", { R_LIBS: lib });
  try {
    const base = `http://127.0.0.1:${port}`;
    const form = { "content-type": "application/x-www-form-urlencoded" };
    const json = "json?auto_unbox=true&digits=NA&pretty=false";
    const arg = (code: string) => `x=${encodeURIComponent(code)}`;
    const post = (path: string, body: string) => once(port, "POST", path, { "Content-Type": "application/x-www-form-urlencoded" }, body);
    const keyOf = (listing: string) => {
      const m = /\/ocpu\/tmp\/(x[0-9a-f]+)\//.exec(listing);
      if (!m) throw new Error(`OpenCPU gave no session key: ${listing.slice(0, 200)}`);
      return m[1]!;
    };
    const dfKey = keyOf(await post("/ocpu/library/base/R/identity", arg(`local({ ${DF}; df })`)));
    const identity = async (code: string): Promise<H2Request> => ({
      url: `${base}/ocpu/library/base/R/identity/${json}`,
      headers: form,
      body: await files.of(arg(code)),
      h1: true,
      close: true,
    });
    const one = await identity("1+1");
    const summary = await identity(SUMMARY);
    const df: H2Request = { url: `${base}/ocpu/tmp/${dfKey}/R/.val/${json}`, headers: {}, h1: true, close: true };
    return {
      name: "OpenCPU",
      counts: { one: count(10), summary: count(6), df: count(4), pair: count(5), clients1: count(10), clients4: count(3) },
      rows: {
        ...fixedRows(one, summary, df),
        pair: (n) =>
          sequential(n, async () => {
            const key = keyOf(await post("/ocpu/library/stats/R/rnorm", "n=1e5"));
            await post(`/ocpu/library/base/R/mean/${json}`, `x=${key}`);
          }),
      },
      lacks: { session: "no sessions to open or close: every call's value is stored under a new key, which expires" },
      check: async (firstRow) => {
        expectJson(await post(`/ocpu/library/base/R/identity/${json}`, arg("1+1")), 2, "OpenCPU 1+1");
        expectJson(await post(`/ocpu/library/base/R/identity/${json}`, arg(SUMMARY)), SUMMARY_JSON, "OpenCPU summary");
        const c = await RawHttpClient.connect(port, USER);
        try {
          const a = await c.request("GET", `/ocpu/tmp/${dfKey}/R/.val/${json}`, { Connection: "close" }, "");
          expectDf(a.body.toString("utf8"), "OpenCPU df", firstRow);
        } finally {
          c.close();
        }
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
