import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import net from "node:net";
import { fileURLToPath } from "node:url";
import { startRock } from "../../src/compose.js";
import { openTestLog } from "../support/logs.js";
import { testConfig, testLogger } from "../support/server.js";
import { testLockDir, testSessionUids, uidsVariable } from "../support/uids.js";

/**
 * Servers on a data folder the test owns (unlike startTestServer, stopping one keeps the folder), so
 * that a second server can be started on what the first one left. Each writes its service log to a file
 * of its own there (test/support/logs.ts).
 */

export interface FolderServer {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

/** The whole server in this process, on a free loopback port, R not started. */
export async function startOnFolder(dataDir: string): Promise<FolderServer> {
  const log = openTestLog("a server in this process", dataDir);
  const rock = await startRock(testConfig(dataDir), { logger: testLogger(log), announce: () => {} }).catch((e: unknown) => {
    log.close();
    throw e;
  });
  log.name = `the server on port ${rock.port} in this process`;
  return {
    url: `http://127.0.0.1:${rock.port}`,
    port: rock.port,
    stop: async () => {
      await rock.close();
      log.close();
    },
  };
}

/** Ports freePort gave this process: the kernel may offer a closed one again before its taker binds it. */
const given = new Set<number>();

/**
 * A port that was free a moment ago: main.ts binds ROCK_PORT as given, so 0 would hide the port. Never
 * one given before: ports picked in a row and bound later (a cluster's nodes and its HAProxy) once came
 * out the same, and HAProxy could not bind its own.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const server = net.createServer();
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address() as net.AddressInfo;
    server.close();
    await once(server, "close");
    if (given.has(port)) continue;
    given.add(port);
    return port;
  }
}

const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url));

export interface ServerProcess extends FolderServer {
  readonly child: ChildProcess;
  /** SIGKILL: no shutdown code runs, as in a crash. Resolves once the process is gone. */
  kill(): Promise<void>;
}

/** The real server (`src/main.ts`) as a child process on `dataDir`; resolves once it answers. */
export async function spawnServer(dataDir: string): Promise<ServerProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", MAIN], {
    env: {
      ...process.env,
      ROCK_PORT: String(port),
      ROCK_HOST: "127.0.0.1",
      ROCK_DATA_DIR: dataDir,
      ROCK_USERS: "cadmin:cadmin:catalog-administrator",
      ROCK_R_START: "false",
      // Its own uid block, locked (as root) in this run's lock folder: never a real server's.
      ROCK_R_SESSION_UIDS: uidsVariable(testSessionUids()),
      ROCK_R_LOCK_DIR: testLockDir(),
      // Sessions on the host's network (test/support/server.ts says why).
      ROCK_R_SESSION_NETWORK: "host",
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const log = openTestLog(`the server process ${child.pid} on port ${port}`, dataDir);
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (chunk: string) => log.write(chunk));
  const exited = once(child, "exit");
  const gone = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await exited;
    }
    log.close();
  };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) {
      log.close();
      throw new Error(`server exited with ${child.exitCode}: ${log.text()}`);
    }
    const up = await fetch(`${url}/_info`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (Date.now() > deadline) {
      await gone();
      throw new Error(`server did not answer on ${port}: ${log.text()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    port,
    child,
    kill: gone,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        await exited;
      }
      log.close();
    },
  };
}
