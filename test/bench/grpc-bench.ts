/**
 * gRPC against REST on the same server, measured with h2load (nghttp2's C load generator), so that
 * the client's own cost does not hide the server's: the server's CPU per call from /proc/<pid>/stat,
 * and h2load's mean request time, one call in flight. A second server with the unary fast path off
 * shows what Connect-ES's own gRPC handler costs for the same calls.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { create, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import {
  EvalRequestSchema,
  EvalResponseSchema,
  GetSessionRequestSchema,
  GetSessionResponseSchema,
} from "../../gen/es/rock/r/v1/rservice_pb.js";
import { cpuSeconds } from "../../src/r/confine/processes.js";
import { basic } from "../support/server.js";
import { onCleanup } from "./cleanup.js";
import { HttpClient } from "./http-client.js";
import { RawGrpcClient } from "./raw-grpc-client.js";
import { ms, section, times, verdict, type Section } from "./report.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";

const run = promisify(execFile);
const USER = "admin";

export interface GrpcBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

/** One kind of call, over REST and over gRPC. */
interface CallPair {
  readonly name: string;
  readonly rest: H2loadCall;
  readonly grpc: H2loadCall;
}

interface H2loadCall {
  readonly path: string;
  readonly headers: Record<string, string>;
  /** A file holding the request body, POSTed when given. */
  readonly file?: string;
}

interface Figures {
  /** Server CPU per call, µs. */
  readonly cpuUs: number;
  /** h2load's mean time per request, µs (median over the rounds). */
  readonly meanUs: number;
}

export async function runGrpcBench(o: GrpcBenchOptions): Promise<Section[]> {
  const missing = await ensureH2load();
  if (missing) {
    const s = section("gRPC vs REST (h2load)");
    s.notes.push(`skipped: ${missing}`);
    return [s];
  }
  const dir = await mkdtemp(join(tmpdir(), "rock-bench-h2load-"));
  const removeDir = onCleanup(() => rm(dir, { recursive: true, force: true }));
  const sections: Section[] = [];
  try {
    o.log("gRPC vs REST: starting a server with the unary fast path, and one without…");
    const fast = await startServerProcess({ rStart: true });
    const reference = await startServerProcess({ rStart: true, env: { ROCK_UNARY_FAST_PATH: "false" } });
    try {
      const rounds = o.quick ? 2 : 5;
      const n = o.quick ? 1000 : 4000;
      const s = section("gRPC vs REST, same server, h2load (C client), one call in flight");
      const rows: { name: string; ours: Record<"rest" | "grpc", Figures>; connect: Figures }[] = [];
      for (const server of [fast, reference]) await warm(server);
      const pairsFast = await callPairs(fast, dir, "fast");
      const pairsRef = await callPairs(reference, dir, "ref");
      for (let i = 0; i < pairsFast.length; i++) {
        const p = pairsFast[i]!;
        o.log(`gRPC vs REST: ${p.name}, ${rounds} rounds × ${n} calls each way…`);
        const ours = await interleaved(fast.pid, { rest: p.rest, grpc: p.grpc }, fast.port, rounds, n);
        const ref = await interleaved(reference.pid, { grpc: pairsRef[i]!.grpc }, reference.port, rounds, n);
        rows.push({ name: p.name, ours, connect: ref.grpc });
      }
      for (const r of rows) {
        const cpu = r.ours.grpc.cpuUs / r.ours.rest.cpuUs;
        const lat = r.ours.grpc.meanUs / r.ours.rest.meanUs;
        s.rows.push(
          {
            figure: `${r.name}: server CPU per call, gRPC / REST`,
            value: `${us(r.ours.grpc.cpuUs)} / ${us(r.ours.rest.cpuUs)}`,
            reference: `Connect-ES gRPC ${us(r.connect.cpuUs)}`,
            ratio: times(cpu),
            target: "≤ 1.2×",
            verdict: verdict(cpu <= 1.2),
          },
          {
            figure: `${r.name}: mean latency, gRPC / REST`,
            value: `${us(r.ours.grpc.meanUs)} / ${us(r.ours.rest.meanUs)}`,
            reference: `Connect-ES gRPC ${us(r.connect.meanUs)}`,
            ratio: times(lat),
            target: "≤ 1.2×",
            verdict: verdict(lat <= 1.2),
          },
        );
      }
      s.notes.push(
        `${rounds} rounds of ${n} calls per protocol, REST and gRPC alternating; h2load -c1 -m1 over h2c (REST too); server CPU = utime+stime of the server process (/proc/<pid>/stat) over the calls; latency = h2load's mean time for request, median of the rounds.`,
      );
      s.notes.push(
        "Reference column: the same gRPC call on a second server with ROCK_UNARY_FAST_PATH=false (Connect-ES's own gRPC handler).",
      );
      sections.push(s);
    } finally {
      await fast.stop();
      await reference.stop();
    }
  } finally {
    await removeDir();
  }
  return sections;
}

/** Installs Debian's nghttp2-client when h2load is missing and this process may; else says why not. */
async function ensureH2load(): Promise<string | undefined> {
  if (await has("h2load")) return undefined;
  if (process.getuid?.() !== 0) return "h2load is missing (Debian package nghttp2-client) and this is not root to install it";
  try {
    await run("apt-get", ["install", "-y", "-q", "nghttp2-client"], { env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  } catch (e) {
    return `h2load is missing and apt-get install nghttp2-client failed: ${(e as Error).message.split("\n")[0]}`;
  }
  return (await has("h2load")) ? undefined : "h2load is still missing after installing nghttp2-client";
}

async function has(command: string): Promise<boolean> {
  try {
    await run("sh", ["-c", `command -v ${command}`]);
    return true;
  } catch {
    return false;
  }
}

/** A session, and its first calls (R's byte-compiler and the server's caches warm). */
async function warm(server: ServerProcess): Promise<void> {
  const http = new HttpClient(server.port, USER);
  try {
    for (let i = 0; i < 3; i++) await http.ok("GET", "/_check");
  } finally {
    http.close();
  }
}

async function callPairs(server: ServerProcess, dir: string, tag: string): Promise<CallPair[]> {
  const http = new HttpClient(server.port, USER);
  const auth = basic(USER);
  let id: string;
  try {
    const a = await http.ok("POST", "/r/sessions", {}, 201);
    id = (JSON.parse(a.body.toString("utf8")) as { id: string }).id;
  } finally {
    http.close();
  }
  const bodyFile = async (name: string, bytes: Uint8Array): Promise<string> => {
    const file = join(dir, `${tag}-${name}.bin`);
    await writeFile(file, bytes);
    return file;
  };
  const grpcHeaders = { "content-type": "application/grpc", te: "trailers", authorization: auth };
  const getSession = create(GetSessionRequestSchema, { id });
  const eval11 = create(EvalRequestSchema, {
    id,
    script: { contentType: "application/x-rscript", data: Buffer.from("1+1") },
    accept: "application/json",
  });
  // Each call answers as it should before it is timed (a 200 with grpc-status ≠ 0 would look fast).
  const raw = new RawGrpcClient(server.port, USER);
  try {
    await raw.unary("/rock.r.v1.RService/GetSession", GetSessionRequestSchema, getSession, GetSessionResponseSchema);
    const answer = await raw.unary("/rock.r.v1.RService/Eval", EvalRequestSchema, eval11, EvalResponseSchema);
    const text = answer.answer.case === "value" ? Buffer.from(answer.answer.value.data).toString() : "";
    if (!/^\[?2\]?$/.test(text)) throw new Error(`gRPC Eval of 1+1 answered ${JSON.stringify(text)}, not 2`);
  } finally {
    raw.close();
  }
  return [
    {
      name: "GetSession (no R)",
      rest: { path: `/r/session/${id}`, headers: { authorization: auth } },
      grpc: {
        path: "/rock.r.v1.RService/GetSession",
        headers: grpcHeaders,
        file: await bodyFile("get-grpc", enveloped(GetSessionRequestSchema, getSession)),
      },
    },
    {
      name: "Eval `1+1` as JSON",
      rest: {
        path: `/r/session/${id}/_eval`,
        headers: { authorization: auth, "content-type": "application/x-rscript", accept: "application/json" },
        file: await bodyFile("eval-rest", Buffer.from("1+1")),
      },
      grpc: {
        path: "/rock.r.v1.RService/Eval",
        headers: grpcHeaders,
        file: await bodyFile("eval-grpc", enveloped(EvalRequestSchema, eval11)),
      },
    },
  ];
}

function enveloped<D extends DescMessage>(schema: D, m: MessageShape<D>): Buffer {
  const body = toBinary(schema, m);
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  out.set(body, 5);
  return out;
}

/** Rounds of each call in turn; CPU summed over all rounds, latency the median of the rounds' means. */
async function interleaved<K extends string>(
  pid: number,
  calls: Record<K, H2loadCall>,
  port: number,
  rounds: number,
  n: number,
): Promise<Record<K, Figures>> {
  const keys = Object.keys(calls) as K[];
  const cpu = Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
  const means = Object.fromEntries(keys.map((k) => [k, [] as number[]])) as Record<K, number[]>;
  for (const k of keys) await h2load(calls[k], port, Math.min(500, n)); // warm-up
  for (let r = 0; r < rounds; r++) {
    for (const k of keys) {
      const before = await serverCpu(pid);
      means[k].push(await h2load(calls[k], port, n));
      cpu[k] += (await serverCpu(pid)) - before;
    }
  }
  const out = {} as Record<K, Figures>;
  for (const k of keys) {
    const sorted = [...means[k]].sort((a, b) => a - b);
    out[k] = { cpuUs: (cpu[k] / (rounds * n)) * 1e6, meanUs: sorted[Math.floor(sorted.length / 2)]! };
  }
  return out;
}

/** Runs h2load; the mean time per request in µs. Fails unless every request got a 2xx. */
async function h2load(c: H2loadCall, port: number, n: number): Promise<number> {
  const args = ["-n", String(n), "-c", "1", "-m", "1"];
  for (const [k, v] of Object.entries(c.headers)) args.push("-H", `${k}: ${v}`);
  if (c.file) args.push("-d", c.file);
  args.push(`http://127.0.0.1:${port}${c.path}`);
  const { stdout } = await run("h2load", args, { maxBuffer: 1 << 20 });
  const done = /requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded/.exec(stdout);
  const codes = /status codes: (\d+) 2xx/.exec(stdout);
  if (!done || !codes || Number(done[2]) !== n || Number(codes[1]) !== n)
    throw new Error(`h2load ${c.path}: not every request succeeded:\n${stdout}`);
  const t = /time for request:\s+(\S+)\s+(\S+)\s+(\S+)/.exec(stdout);
  if (!t) throw new Error(`h2load ${c.path}: no request times in:\n${stdout}`);
  return toMicros(t[3]!);
}

function toMicros(v: string): number {
  const m = /^([\d.]+)(us|ms|s)$/.exec(v);
  if (!m) throw new Error(`unreadable h2load time ${v}`);
  const x = Number(m[1]);
  return m[2] === "us" ? x : m[2] === "ms" ? x * 1000 : x * 1e6;
}

async function serverCpu(pid: number): Promise<number> {
  const seconds = await cpuSeconds(pid);
  if (seconds === undefined) throw new Error(`the server process ${pid} is gone`);
  return seconds;
}

const us = (x: number): string => ms(x / 1000);
