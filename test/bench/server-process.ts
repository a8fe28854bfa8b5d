/**
 * The server under test in its own process, as production runs it: the compiled program (`npm start`,
 * `node src/cli/bin.js`; `npm run bench` builds it first), or, for another version's checkout (an A/B
 * against a commit from before the build existed), its TypeScript through tsx; configured through ROCK_* variables, with a fresh data folder. Stopped with SIGTERM (which stops the
 * R server and its process group), SIGKILL after 5 s; any R process group it leaves behind is killed.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import http from "node:http";
import { onCleanup } from "./cleanup.js";
import { freePort } from "./rserve-client.js";
import { processes } from "../support/procfs.js";
import { testSessionUids, uidsVariable } from "../support/uids.js";

/** The repository root (this file is test/bench/server-process.ts). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** The bench's users: password = name. */
export const BENCH_USERS = "admin:admin:administrator,manager;cadmin:cadmin:catalog-administrator;user:user:user";

export interface ServerProcess {
  readonly port: number;
  readonly pid: number;
  readonly dataDir: string;
  /** Resident set size of the server process (bytes), from /proc/<pid>/status. */
  rss(): number;
  /** Idempotent; also registered with the cleanup registry. */
  stop(): Promise<void>;
}

export interface ServerProcessOptions {
  /** ROCK_R_START: true waits for GET /_check = 200, false for GET /_info = 200. */
  readonly rStart: boolean;
  readonly timeoutMs?: number;
  /** More ROCK_* settings for this server. */
  readonly env?: Readonly<Record<string, string>>;
  /** A port picked beforehand (nodes that must know each other's addresses); default: a free one. */
  readonly port?: number;
  /** The checkout the server runs from (another version's, for an A/B); default: this one. */
  readonly root?: string;
  /** Runs the TypeScript through tsx; default: only for another checkout (a version from before the build). */
  readonly typescript?: boolean;
  /** Called with each whole line the server writes (its service log: JSON lines on stderr). */
  readonly onLine?: (line: string) => void;
  /** A command the server is run by (`ip netns exec NAME`: in a network namespace of the bench's). */
  readonly runner?: readonly string[];
  /** The address it listens on; default 127.0.0.1. */
  readonly host?: string;
}

/** Synchronous last resort on exit: whatever is still alive of the servers started here. */
const live = new Map<number, () => void>();
process.on("exit", () => {
  for (const kill of live.values()) kill();
});

export async function startServerProcess(o: ServerProcessOptions): Promise<ServerProcess> {
  const port = o.port ?? (await freePort());
  const dataDir = await mkdtemp(join(tmpdir(), "rock-bench-server-"));
  const typescript = o.typescript ?? (o.root !== undefined && o.root !== ROOT);
  const program = typescript ? ["--import", "tsx", "src/main.ts"] : ["src/cli/bin.js"];
  const host = o.host ?? "127.0.0.1";
  const [command = process.execPath, ...args] = [...(o.runner ?? []), process.execPath, ...program];
  const child = spawn(command, args, {
    cwd: o.root ?? ROOT,
    // Its own process group, as under a service manager: a Ctrl-C of the bench reaches only the
    // bench, which then stops the server with one SIGTERM.
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      ROCK_PORT: String(port),
      ROCK_HOST: host,
      ROCK_DATA_DIR: dataDir,
      ROCK_USERS: BENCH_USERS,
      ROCK_R_START: String(o.rStart),
      // Servers sharing a uid range end each other's sessions at start: each gets its own.
      ROCK_R_SESSION_UIDS: uidsVariable(testSessionUids()),
      // The figures recorded before r.sessionNetwork's default became auto are of the host's network,
      // and a bench server never turns forwarding on in this machine's namespace: the network section
      // compares restricted with it, in a namespace of its own.
      ROCK_R_SESSION_NETWORK: "host",
      ...o.env,
    },
  });
  const pid = child.pid;
  if (pid === undefined) {
    rmSync(dataDir, { recursive: true, force: true });
    throw new Error("could not spawn the server");
  }
  // Keep the last lines of its log for error messages; the pipes must be drained anyway.
  let log = "";
  const onLine = o.onLine;
  for (const stream of [child.stdout, child.stderr]) {
    stream?.setEncoding("utf8");
    let partial = "";
    stream?.on("data", (text: string) => {
      log = (log + text).slice(-4000);
      if (!onLine) return;
      const lines = (partial + text).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) onLine(line);
    });
  }
  const groups = new Set<number>();
  live.set(pid, () => {
    for (const g of [...groups, ...rGroupsOf(pid)]) killGroup(g);
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  const stop = onCleanup(async () => {
    // The R server runs detached (its own process group) as a child of the server: note the groups
    // now, so that they can be killed if the server does not stop them.
    for (const g of rGroupsOf(pid)) groups.add(g);
    if (alive(child)) {
      const exited = new Promise<void>((r) => child.once("exit", () => r()));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
    // A SIGKILLed session may linger a moment before it is reaped.
    let left = [...groups].flatMap((g) => membersOf(g));
    for (let i = 0; i < 30 && left.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      left = [...groups].flatMap((g) => membersOf(g));
    }
    for (const g of groups) killGroup(g);
    live.delete(pid);
    await rm(dataDir, { recursive: true, force: true });
    if (left.length > 0) throw new Error(`server ${pid} left ${left.length} R process(es) behind (killed): ${left.join(", ")}`);
  });

  const path = o.rStart ? "/_check" : "/_info";
  const deadline = Date.now() + (o.timeoutMs ?? 60_000);
  try {
    for (;;) {
      if (!alive(child)) throw new Error(`server exited (${child.exitCode ?? child.signalCode}): ${log}`);
      if ((await status(host, port, path)) === 200) break;
      if (Date.now() > deadline) throw new Error(`server did not answer 200 on ${path} in time: ${log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (e) {
    await stop().catch(() => {});
    throw e;
  }
  return {
    port,
    pid,
    dataDir,
    rss: () => vmRss(pid),
    stop,
  };
}

function alive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/** Status of a GET on a fresh connection; 0 when nothing answers. */
function status(host: string, port: number, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host, port, path, agent: false, timeout: 2000 }, (res) => {
      res.resume();
      res.once("end", () => resolve(res.statusCode ?? 0));
    });
    req.once("timeout", () => req.destroy());
    req.once("error", () => resolve(0));
  });
}

/** VmRSS of `pid` in bytes. */
export function vmRss(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

/** Process groups led by children of `pid` (the R server is started detached). */
function rGroupsOf(pid: number): number[] {
  return processes()
    .filter((p) => p.ppid === pid && p.pgrp === p.pid)
    .map((p) => p.pid);
}

function membersOf(pgrp: number): number[] {
  return processes()
    .filter((p) => p.pgrp === pgrp && !p.zombie)
    .map((p) => p.pid);
}

function killGroup(pgrp: number): void {
  try {
    process.kill(-pgrp, "SIGKILL");
  } catch {
    // empty
  }
}

/** Processes running the R server script (src/r/process/worker.R) on this machine, from any server. */
export function rWorkerCount(): number {
  let n = 0;
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const args = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0");
      if (args.some((a) => a.endsWith("/worker.R"))) n++;
    } catch {
      // exited meanwhile
    }
  }
  return n;
}
