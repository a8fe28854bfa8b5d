/**
 * h2load (nghttp2's C load generator) as the bench sections run it: a C client, so that the client's
 * own cost does not hide the server's. One process per client (-c1 -m1), each with its own request:
 * a client of this server needs a session of its own, which one h2load process cannot spread over
 * its connections.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { ensureDebian, hasCommand } from "./debian.js";

const run = promisify(execFile);

export interface H2Request {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** A file holding the body, POSTed when given. */
  readonly body?: string;
  /** HTTP/1.1 (--h1) instead of h2c. */
  readonly h1?: boolean;
  /** A new connection per request (Connection: close, HTTP/1.1). */
  readonly close?: boolean;
}

export interface H2Run {
  /** Wall time of the run, from h2load's "finished in". */
  readonly seconds: number;
  /** h2load's mean time per request, µs. */
  readonly meanUs: number;
}

/** Installs Debian's nghttp2-client when h2load is missing and this process may; else says why not. */
export const ensureH2load = (): Promise<string | undefined> => ensureDebian("h2load", ["nghttp2-client"], () => hasCommand("h2load"));

/** `n` requests from one client, one at a time. Fails unless every request got a 2xx. */
export function h2load(q: H2Request, n: number): Promise<H2Run> {
  const args = ["-c", "1"];
  if (q.h1 || q.close) args.push("--h1");
  for (const [k, v] of Object.entries(q.headers)) args.push("-H", `${k}: ${v}`);
  if (q.close) args.push("-H", "connection: close");
  if (q.body) args.push("-d", q.body);
  return runH2load([...args, q.url], n);
}

/**
 * h2load with `args` (clients, headers, body, URLs), `n` requests in all, one in flight per client.
 * Fails unless every request got a 2xx (a refused call would look fast).
 */
export async function runH2load(args: readonly string[], n: number): Promise<H2Run> {
  const { stdout } = await run("h2load", ["-n", String(n), "-m", "1", ...args], { maxBuffer: 1 << 20, timeout: 10 * 60_000 });
  const done = /requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded/.exec(stdout);
  const codes = /status codes: (\d+) 2xx/.exec(stdout);
  const what = args.filter((a) => a.startsWith("http")).join(" ");
  if (!done || !codes || Number(done[2]) !== n || Number(codes[1]) !== n)
    throw new Error(`h2load ${what}: not every request succeeded:\n${stdout}`);
  const finished = /finished in ([\d.]+(?:us|ms|s)),/.exec(stdout);
  const mean = /time for request:\s+\S+\s+\S+\s+(\S+)/.exec(stdout);
  if (!finished || !mean) throw new Error(`h2load ${what}: no times in:\n${stdout}`);
  return { seconds: micros(finished[1]!) / 1e6, meanUs: micros(mean[1]!) };
}

/** One h2load process per request at once, `n` requests each; wall seconds of the slowest. */
export async function h2loadAll(requests: readonly H2Request[], n: number): Promise<number> {
  return Math.max(...(await Promise.all(requests.map(async (q) => (await h2load(q, n)).seconds))));
}

function micros(v: string): number {
  const m = /^([\d.]+)(us|ms|s)$/.exec(v);
  if (!m) throw new Error(`unreadable h2load time ${v}`);
  const x = Number(m[1]);
  return m[2] === "us" ? x : m[2] === "ms" ? x * 1000 : x * 1e6;
}
