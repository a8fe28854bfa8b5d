import fs from "node:fs";
import path from "node:path";
import { authInterceptor } from "./auth/interceptor.js";
import { bootstrapUsers } from "./auth/bootstrap.js";
import { UserDirectory } from "./auth/users.js";
import type { Config } from "./config/config.js";
import { registerService } from "./edge/service-registry.js";
import { restStyleOf } from "./rest-contracts.js";
import { NetworkService } from "../gen/es/rock/networks/v1/networks_pb.js";
import { RService } from "../gen/es/rock/r/v1/rservice_pb.js";
import { NetworkCatalog } from "./networks/catalog.js";
import { createNetworkServiceHandlers } from "./networks/service/handlers.js";
import { ConsoleLog } from "./r/console-log.js";
import { assertPrivateConfig, protectDataFolder } from "./r/confine/data-folder.js";
import { decideIsolation, sessionsRoot } from "./r/confine/isolation.js";
import { REngine } from "./r/engine.js";
import { PackageManager } from "./r/packages/index.js";
import { drainPolicy } from "./server/drain-policy.js";
import { createRServiceHandlers } from "./r/service/handlers.js";
import { startServer } from "./server/app.js";
import { drainGate } from "./server/drain-gate.js";
import { ServiceLifecycle } from "./server/lifecycle.js";
import { accessLog } from "./server/access-log.js";
import { callObserver } from "./server/call-observer.js";
import { engineLog } from "./server/engine-log.js";
import { faultConversion } from "./server/faults.js";
import { createLogger, type Logger } from "./server/logger.js";
import { METRICS_OFF } from "./server/metrics-handler.js";
import { ServiceMetrics } from "./server/metrics.js";
import { readTlsCredentials } from "./listener/tls.js";

export interface Rock {
  readonly port: number;
  /** Serving, draining, stopped: shutdown.ts drains it before close(). */
  readonly lifecycle: ServiceLifecycle;
  /** Stops at once: calls still running are cut. */
  close(): Promise<void>;
}

export interface ComposeOptions {
  readonly logger?: Logger;
  /** Where the first start's generated administrator password (or the file holding it) is announced. */
  readonly announce?: (text: string) => void;
  /**
   * Whether `announce` reaches a person at a terminal, who may see the password itself; by default
   * only the default announce (stdout) does, when stdout is a terminal.
   */
  readonly announceToTerminal?: boolean;
}

/** config → users → R engine → stores → one server for every protocol. */
export async function startRock(config: Config, opts: ComposeOptions = {}): Promise<Rock> {
  const logger = opts.logger ?? createLogger(config.log);
  // First: a wrong certificate file refuses the start before anything is created.
  const tls = readTlsCredentials(config.tls);
  const isolation = decideIsolation(config.r);
  if (isolation.warning) logger.warn(isolation.warning);
  if (isolation.isolated && config.configFile) assertPrivateConfig(config.configFile);
  fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const announce = opts.announce ?? ((t: string) => process.stdout.write(t + "\n"));
  const toTerminal = opts.announceToTerminal ?? (opts.announce === undefined && process.stdout.isTTY === true);
  const users = new UserDirectory(await bootstrapUsers(config.users, config.dataDir, announce, toTerminal), config.auth);
  const cleanups: (() => Promise<void> | void)[] = [() => users.close()];
  const cleanup = async () => {
    for (const c of cleanups.reverse()) await c();
  };
  try {
    const log = new ConsoleLog({ file: path.join(config.dataDir, "rserver.log"), maxBytes: config.r.logMaxBytes, files: config.r.logFiles });
    cleanups.push(() => log.close());
    const sessionsDir = sessionsRoot(config.r, config.dataDir, isolation.isolated);
    let metrics: ServiceMetrics | undefined;
    const logEngine = engineLog(logger);
    const engine = new REngine({
      config: config.r,
      dataDir: config.dataDir,
      sessionsDir,
      isolated: isolation.isolated,
      log,
      ...(config.packages.library ? { library: config.packages.library } : {}),
      onEvent: (event) => {
        logEngine(event);
        metrics?.recordEngine(event);
      },
    });
    // After the engine: its gauges read it.
    if (config.metrics.enabled) metrics = new ServiceMetrics({ sessions: () => sessionCounts(engine) });
    const callSinks = [...(config.log.level === "silent" ? [] : [accessLog(logger)]), ...(metrics ? [metrics.recordCall] : [])];
    cleanups.push(() => engine.close());
    const scratch = path.join(config.dataDir, "packages-tmp");
    fs.mkdirSync(scratch, { recursive: true });
    const packages = new PackageManager({
      rExecutable: config.r.executable,
      setupLibrary: config.r.setupLibrary,
      ...(config.packages.library ? { library: config.packages.library } : {}),
      repos: config.packages.repos,
      gitHost: config.packages.gitHost,
      gitOrganization: config.packages.gitOrganization,
      log: (text) => log.append(text),
      scratchDir: scratch,
      timeoutSeconds: config.packages.timeoutSeconds,
    });
    const catalog = await NetworkCatalog.open(path.join(config.dataDir, "networks"));
    cleanups.push(() => catalog.close());
    const lifecycle = new ServiceLifecycle({ drainMs: config.server.drainSeconds * 1000, busy: () => engine.busy });
    protectDataFolder(config.dataDir, [sessionsDir, ...(config.packages.library ? [config.packages.library] : [])]);

    const server = await startServer({
      port: config.port,
      host: config.host,
      tls,
      services: [
        registerService(
          RService,
          createRServiceHandlers({ engine, node: config.node, r: config.r, maxUploadBytes: config.limits.maxUploadBytes, packages }),
          restStyleOf(RService),
        ),
        registerService(NetworkService, createNetworkServiceHandlers(catalog), restStyleOf(NetworkService)),
      ],
      interceptors: [
        // Nothing reads the calls with the log silent and metrics off: not even timed then.
        ...(callSinks.length === 0 ? [] : [callObserver({ namesSession: (m) => m.parent === RService && m.input.fields.some((f) => f.name === "id"), sinks: callSinks })]),
        // Outside the drain gate and authentication, so that their refusals are faults too; inside
        // the observer, which records the answer the client gets.
        faultConversion,
        drainGate(lifecycle, drainPolicy),
        authInterceptor(users),
      ],
      maxBodyBytes: config.limits.maxBodyBytes,
      maxUploadBytes: config.limits.maxUploadBytes,
      timeouts: config.limits,
      logger,
      serving: lifecycle,
      metrics: { registry: metrics?.registry ?? METRICS_OFF, users },
      unaryFastPath: config.server.unaryFastPath,
    });
    cleanups.push(() => server.close());
    // Without R the catalogue still serves; /_check then answers 500 until R runs.
    // A failed start is logged by the engine's event.
    await engine.boot().catch(() => undefined);
    const close = async () => {
      lifecycle.cut();
      await cleanup();
    };
    return { port: server.port, lifecycle, close };
  } catch (e) {
    await cleanup();
    throw e;
  }
}

function sessionCounts(engine: REngine): { total: number; busy: number } {
  const sessions = engine.sessions();
  return { total: sessions.length, busy: sessions.filter((s) => s.busy).length };
}
