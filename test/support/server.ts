import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { defaults } from "../../src/config/load.js";
import type { Config, UserConfig } from "../../src/config/config.js";
import { startRock, type Rock } from "../../src/compose.js";
import { createLogger, type Logger } from "../../src/server/logger.js";
import { openTestLog, type TestLog } from "./logs.js";
import { testLockDir, testSessionUids } from "./uids.js";

/** One user per role (the password is the user name), plus one without any role. */
export const USERS: readonly UserConfig[] = [
  { name: "admin", secret: "{noop}admin", roles: ["administrator"] },
  { name: "manager", secret: "manager", roles: ["manager"] },
  { name: "user", secret: "user", roles: ["user"] },
  { name: "user2", secret: "user2", roles: ["user"] },
  // bcrypt of "cadmin": a hashed secret on the same paths as plain ones.
  { name: "cadmin", secret: "{bcrypt}$2b$10$DVvE5haT7og8pbyI6tAvfOZM.p3m0oaKoolo6b39SuDeYun2Feuxa", roles: ["catalog-administrator"] },
  { name: "reviewer", secret: "reviewer", roles: ["catalog-reviewer"] },
  { name: "editor", secret: "editor", roles: ["catalog-editor"] },
  { name: "nobody", secret: "nobody", roles: [] },
];

export interface TestServer {
  readonly port: number;
  readonly url: string;
  readonly dataDir: string;
  readonly config: Config;
  stop(): Promise<void>;
}

export interface ConfigPatch {
  readonly users?: readonly UserConfig[];
  readonly node?: Partial<Config["node"]>;
  readonly r?: Partial<Config["r"]>;
  readonly packages?: Partial<Config["packages"]>;
  readonly limits?: Partial<Config["limits"]>;
  readonly auth?: Partial<Config["auth"]>;
  readonly server?: Partial<Config["server"]>;
  readonly metrics?: Partial<Config["metrics"]>;
  /** Certificate and key files: the server speaks HTTPS only and `url` is https. */
  readonly tls?: Config["tls"];
  /** A logger of the test's own, given every line the server logs as well (its log file gets them all). */
  readonly logger?: Logger;
}

/** The configuration of a test server on `dataDir`: a free loopback port, the test users, R not started. */
export function testConfig(dataDir: string, patch: Omit<ConfigPatch, "logger"> = {}): Config {
  const base = defaults();
  return {
    ...base,
    port: 0,
    host: "127.0.0.1",
    tls: patch.tls ?? base.tls,
    dataDir,
    users: patch.users ?? USERS,
    node: { ...base.node, ...patch.node },
    // Sessions on the host's network, as before r.sessionNetwork's default became auto: a test's sessions reach its servers on 127.0.0.1 (package repositories), and a test server never turns forwarding on in this machine's namespace; test/r/session-network.test.ts asks for restricted in namespaces of its own.
    r: { ...base.r, startOnBoot: false, sessionUids: testSessionUids(), lockDir: testLockDir(), sessionNetwork: "host", ...patch.r },
    packages: { ...base.packages, ...patch.packages },
    limits: { ...base.limits, ...patch.limits },
    // Tests log in wrongly on purpose from one address: only tests about the throttle ask for it.
    auth: { ...base.auth, maxFailures: 0, ...patch.auth },
    // Most tests call at once: no warm-up unless a test asks for one.
    server: { ...base.server, warmUpCalls: 0, ...patch.server },
    metrics: { ...base.metrics, ...patch.metrics },
  };
}

/**
 * The service log of a server in this process, from info up, written to `log` (test/support/logs.ts:
 * never the run's output; a failure shows its last lines), and handed to `also` too, a test's own logger.
 */
export function testLogger(log: TestLog, also?: Logger): Logger {
  const logger = createLogger({ level: "info", destination: { write: (line: string) => log.write(line) } });
  if (!also) return logger;
  return {
    info(msg, fields) {
      logger.info(msg, fields);
      also.info(msg, fields);
    },
    warn(msg, fields) {
      logger.warn(msg, fields);
      also.warn(msg, fields);
    },
    error(msg, fields) {
      logger.error(msg, fields);
      also.error(msg, fields);
    },
  };
}

/**
 * A whole server on a free loopback port with a fresh data folder, its service log in `service.log`
 * there; `stop()` removes both.
 */
export async function startTestServer(patch: ConfigPatch = {}): Promise<TestServer> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "rock-test-"));
  const config = testConfig(dataDir, patch);
  const log = openTestLog("a server in this process", dataDir);
  let rock: Rock;
  try {
    rock = await startRock(config, { logger: testLogger(log, patch.logger), announce: () => {} });
  } catch (e) {
    log.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw e;
  }
  log.name = `the server on port ${rock.port} in this process`;
  return {
    port: rock.port,
    url: `${patch.tls ? "https" : "http"}://127.0.0.1:${rock.port}`,
    dataDir,
    config,
    async stop() {
      await rock.close();
      log.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export function basic(user: string, password = user): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;
}
