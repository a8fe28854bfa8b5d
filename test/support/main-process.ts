import { spawn } from "node:child_process";
import { once } from "node:events";
import { basename } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../networks/server-support.js";
import { openTestLog } from "./logs.js";
import { testLockDir, testSessionUids, uidsVariable } from "./uids.js";

/** The repository root: commands run from there as a person runs them from a checkout. */
export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export interface Finished {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunOptions {
  /** ROCK_* variables of the run; the test's own ROCK_* environment is never passed on. */
  readonly env?: Readonly<Record<string, string>>;
  /** Written to stdin, which is then closed (a pipe, never a terminal). */
  readonly input?: string;
  /** The command instead of `node --import tsx src/main.ts` (e.g. the bin shim). */
  readonly command?: readonly string[];
  readonly timeoutMs?: number;
}

/**
 * As root, a server locks its uid block in ROCK_R_LOCK_DIR: each run gets a block of its own (a start
 * on the default block would collide with a real server's, or another test run's) and this run's lock
 * folder, unless `own` says otherwise.
 */
function environment(own: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("ROCK_")));
  // Sessions on the host's network unless the test asks (test/support/server.ts says why).
  return {
    ...inherited,
    ROCK_R_SESSION_UIDS: uidsVariable(testSessionUids()),
    ROCK_R_LOCK_DIR: testLockDir(),
    ROCK_R_SESSION_NETWORK: "host",
    ...own,
  };
}

/**
 * Runs the program to its end (a command, or a start that fails) and answers how it ended. A run still
 * going after `timeoutMs` is killed and answered with code null: a start that should have failed.
 */
export async function runMain(args: readonly string[], o: RunOptions = {}): Promise<Finished> {
  const command = o.command ?? [process.execPath, "--import", "tsx", "src/main.ts"];
  const child = spawn(command[0]!, [...command.slice(1), ...args], { cwd: ROOT, env: environment(o.env), stdio: ["pipe", "pipe", "pipe"] });
  // What it printed, both streams, for a failure to show (test/support/logs.ts).
  const log = openTestLog(`\`${[basename(command.at(-1)!), ...args].join(" ")}\` (process ${child.pid}; stdout and stderr)`);
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (t: string) => {
    stdout += t;
    log.write(t);
  });
  child.stderr.setEncoding("utf8").on("data", (t: string) => {
    stderr += t;
    log.write(t);
  });
  child.stdin.end(o.input ?? "");
  const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
  const timer = setTimeout(() => child.kill("SIGKILL"), o.timeoutMs ?? 20_000);
  const [code, signal] = await exited;
  clearTimeout(timer);
  log.close();
  return { code: signal === "SIGKILL" ? null : code, stdout, stderr };
}

export interface MainServer {
  readonly url: string;
  /** What the server printed so far (its log; written to `service.log` in its ROCK_DATA_DIR when there is one). */
  stderr(): string;
  stop(): Promise<void>;
}

/** The server as production starts it, configured by `env` only, R not started; resolves once /_info answers. */
export async function startMain(env: Readonly<Record<string, string>>): Promise<MainServer> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: ROOT,
    env: environment({ ROCK_PORT: String(port), ROCK_HOST: "127.0.0.1", ROCK_R_START: "false", ...env }),
    stdio: ["ignore", "ignore", "pipe"],
  });
  const log = openTestLog(`the server process ${child.pid} on port ${port}`, env.ROCK_DATA_DIR);
  child.stderr.setEncoding("utf8").on("data", (t: string) => log.write(t));
  const exited = once(child, "exit");
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
    log.close();
  };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  while (
    !(await fetch(`${url}/_info`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`the server did not start: ${log.text()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, stderr: () => log.text(), stop };
}
