/**
 * The real server (`node --import tsx src/main.ts`) in a process of its own, configured through ROCK_*
 * variables over a fresh temporary data folder, for tests about signals and starts. It runs in its own
 * process group (as under a service manager): the signals a test sends reach only the server. kill()
 * ends whatever is left of it and of the R processes it started, and removes the folder.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../networks/server-support.js";
import { openTestLog } from "./logs.js";
import { testLockDir, testSessionUids, uidsVariable } from "./uids.js";
import { processes } from "./procfs.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** Date.now() when it was seen. */
  readonly at: number;
}

export interface RockProcess {
  readonly pid: number;
  readonly url: string;
  readonly port: number;
  readonly dataDir: string;
  /** Its session uids, as ROCK_R_SESSION_UIDS says them (`first-last`); a server started again on its data folder takes them too. */
  readonly uids: string;
  readonly exited: Promise<Exit>;
  /** The service log so far (its stderr, written to `service.log` in its data folder). */
  log(): string;
  /** Notes the R server's process group (while it runs), so that leftovers() can look for its members. */
  noteRServer(): number | undefined;
  /** Live processes of the noted R server groups or running as a session uid of this server. */
  leftovers(): number[];
  /** SIGKILL to the server and to every leftover; removes the data folder. */
  kill(): Promise<void>;
}

/** Every server spawned and not yet killed: test/support/hooks.ts kills what a failed test left. */
const spawned = new Set<RockProcess>();

/** Kills every server spawnRock started that is still there (mocha's root afterAll). */
export async function killSpawnedRocks(): Promise<void> {
  await Promise.all([...spawned].map((p) => p.kill()));
}

/** The user names are the passwords. */
export const PROCESS_USERS = "admin:admin:administrator,manager;user:user:user";

export interface SpawnOptions {
  /** A port picked beforehand. */
  readonly port?: number;
  /** The data folder of a server started again (kill() leaves it: the test removes it). */
  readonly dataDir?: string;
  /** The session uids of a server started again (`first-last`). */
  readonly uids?: string;
  /** The compiled program (`node src/cli/bin.js`, as `npm start` runs it) instead of the TypeScript through tsx. */
  readonly compiled?: boolean;
  /** A command the server is run by (`ip netns exec NAME`: in a network namespace of a test's). */
  readonly runner?: readonly string[];
  /** The address it listens on and is called at; default 127.0.0.1. */
  readonly host?: string;
}

/**
 * `env` may depend on the port the server is given (ROCK_SERVER, the node's own URL); `port` is a port
 * picked beforehand (nodes that must know each other's addresses before they start).
 */
export async function spawnRock(
  env: Readonly<Record<string, string>> | ((port: number) => Readonly<Record<string, string>>) = {},
  options: SpawnOptions = {},
): Promise<RockProcess> {
  const port = options.port ?? (await freePort());
  const own = typeof env === "function" ? env(port) : env;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "rock-process-"));
  // A block of its own, unless the test gives one (a server started again, two servers on one block).
  const uids = options.uids ?? own.ROCK_R_SESSION_UIDS ?? uidsVariable(testSessionUids());
  const [first, last] = uids.split("-").map(Number) as [number, number];
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("ROCK_")));
  const program = options.compiled ? ["src/cli/bin.js"] : ["--import", "tsx", "src/main.ts"];
  const host = options.host ?? "127.0.0.1";
  const [command = process.execPath, ...args] = [...(options.runner ?? []), process.execPath, ...program];
  const child = spawn(command, args, {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "ignore", "pipe"],
    env: {
      ...inherited,
      ROCK_PORT: String(port),
      ROCK_HOST: host,
      ROCK_DATA_DIR: dataDir,
      ROCK_USERS: PROCESS_USERS,
      ROCK_R_SESSION_UIDS: uids,
      ROCK_R_LOCK_DIR: testLockDir(),
      // Tests read the log as it is written: each line at once (test/server/logging.test.ts tests lines written together).
      ROCK_LOG_FLUSH_MS: "0",
      // Most tests call at once: no warm-up unless a test asks for one.
      ROCK_WARM_UP_CALLS: "0",
      // Sessions on the host's network unless the test asks (test/support/server.ts says why).
      ROCK_R_SESSION_NETWORK: "host",
      ...own,
    },
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error("could not spawn the server");
  const log = openTestLog(`the server process ${pid} on port ${port}`, dataDir);
  child.stderr.setEncoding("utf8").on("data", (text: string) => log.write(text));
  const exited = once(child, "exit").then(([code, signal]) => ({ code, signal, at: Date.now() }) as Exit);
  const groups = new Set<number>();
  const noteRServer = (): number | undefined => {
    const leader = processes().find((p) => p.ppid === pid && p.pgrp === p.pid);
    if (leader) groups.add(leader.pid);
    return leader?.pid;
  };
  const leftovers = (): number[] =>
    processes()
      .filter((p) => !p.zombie && (groups.has(p.pgrp) || (p.uid >= first && p.uid <= last)))
      .map((p) => p.pid);
  const rock: RockProcess = {
    pid,
    port,
    url: `http://${host}:${port}`,
    dataDir,
    uids,
    exited,
    log: () => log.text(),
    noteRServer,
    leftovers,
    async kill() {
      spawned.delete(rock);
      if (child.exitCode === null && child.signalCode === null) {
        noteRServer();
        child.kill("SIGKILL");
        await exited;
      }
      for (const g of groups) signal(-g);
      for (const p of leftovers()) signal(p);
      log.close();
      if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  spawned.add(rock);
  return rock;
}

/** Polls GET `path` until it answers `status` (a refused connection counts as 0). */
export async function untilAnswers(url: string, path: string, status: number, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (
    (await fetch(url + path).then(
      (r) => r.status,
      () => 0,
    )) !== status
  ) {
    if (Date.now() > end) throw new Error(`GET ${path} did not answer ${status} in time`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function signal(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // gone
  }
}
