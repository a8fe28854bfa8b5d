import type { ServiceImpl } from "@connectrpc/connect";
import fs from "node:fs";
import path from "node:path";
import { authInterceptor } from "./interceptors/auth.js";
import { networkMatcher } from "./auth/open-networks.js";
import { bootstrapUsers } from "./auth/bootstrap.js";
import { UserDirectory } from "./auth/users.js";
import type { Config } from "./config/config.js";
import { registerService, wrapMethods, type RegisteredService } from "./transport/service-registry.js";
import { restStyleOf } from "./rest-contracts.js";
import { NetworkService } from "../gen/es/rock/networks/v1/networks_pb.js";
import { RService } from "../gen/es/rock/r/v1/rservice_pb.js";
import { NetworkCatalog } from "./networks/catalog.js";
import { createNetworkServiceHandlers } from "./networks/service/handlers.js";
import { ConsoleLog } from "./r/process/console-log.js";
import { assertPrivateConfig, protectDataFolder } from "./r/confine/data-folder.js";
import { decideIsolation, listableByOthers, sessionsRoot } from "./r/confine/isolation.js";
import { lockSessionUids } from "./r/confine/range-lock.js";
import { REngine } from "./r/engine/engine.js";
import { PackageManager } from "./r/packages/index.js";
import { drainPolicy } from "./server/drain-policy.js";
import { createRServiceHandlers } from "./r/service/handlers.js";
import { startServer, type RunningServer } from "./server/app.js";
import { drainGate } from "./interceptors/drain-gate.js";
import { ServiceLifecycle } from "./server/lifecycle.js";
import { accessLog } from "./server/access-log.js";
import { callObserver } from "./interceptors/call-observer.js";
import { engineLog } from "./server/engine-log.js";
import { faultConversion } from "./interceptors/faults.js";
import { createLogger, type Logger } from "./server/logger.js";
import { METRICS_OFF } from "./server/metrics-handler.js";
import { ServiceMetrics } from "./server/metrics.js";
import { readTlsCredentials } from "./listener/tls.js";
import { OpalRegistration } from "./cluster/opal-registration.js";
import { forwardingMethods } from "./cluster/forwarding.js";
import { parsePeers, PeerTable } from "./cluster/peers.js";
import { clusterFanOut, clusterRoute } from "./cluster/routing.js";
import { catalogueServedElsewhere } from "./cluster/served-elsewhere.js";
import { taggedSessionId } from "./cluster/session-ids.js";
import { registrationLog } from "./server/registration-log.js";
import { clientAddressOf } from "./server/client-address.js";
import { lockDataFolder } from "./server/data-lock.js";
import { warmUp } from "./server/warm-up.js";
import { assertNoNetwork, sessionNetwork, sessionQuotas, sessionView } from "./session-confinement.js";
import type { CallRecord } from "./interceptors/call-observer.js";
import { randomUUID } from "node:crypto";

/** The most the warm-up may take (~1 s for its 1,000 default calls here): it never holds the start longer. */
const WARM_UP_TIMEOUT_MS = 30_000;

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
  const peers = new PeerTable(config.node.id, parsePeers(config.cluster.peers), config.cluster.catalogNode);
  const isolation = decideIsolation(config.r);
  if (isolation.warning) logger.warn(isolation.warning);
  assertNoNetwork(config, isolation.isolated);
  for (const warning of [...config.warnings, ...securityWarnings(config)]) logger.warn(warning);
  if (isolation.isolated && config.configFile) assertPrivateConfig(config.configFile);
  fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const cleanups: (() => Promise<void> | void)[] = [];
  const cleanup = async () => {
    for (const c of cleanups.reverse()) await c();
  };
  try {
    // One server per data folder and per uid range, before anything in either is read or reaped;
    // released last, once sessions ended.
    cleanups.push(await lockDataFolder(config.dataDir));
    const uidLock = isolation.isolated ? await lockSessionUids(config.r.sessionUids, config.r.lockDir) : undefined;
    if (uidLock) cleanups.push(() => uidLock.release());
    if (uidLock?.warning) logger.warn(uidLock.warning);
    const announce = opts.announce ?? ((t: string) => process.stdout.write(`${t}\n`));
    const toTerminal = opts.announceToTerminal ?? (opts.announce === undefined && process.stdout.isTTY === true);
    const users = new UserDirectory(await bootstrapUsers(config.users, config.dataDir, announce, toTerminal), config.auth);
    cleanups.push(() => users.close());
    const log = new ConsoleLog({
      file: path.join(config.dataDir, "rserver.log"),
      maxBytes: config.r.logMaxBytes,
      files: config.r.logFiles,
    });
    cleanups.push(() => log.close());
    // After the range's lock: what a crashed run of the range left is replaced.
    const network = await sessionNetwork(config, isolation.isolated, logger);
    if (network.policy === "restricted") cleanups.push(() => network.links.close());
    const sessionsDir = sessionsRoot(config.r, config.dataDir, isolation.isolated);
    const quotas = sessionQuotas(config, isolation.isolated, logger);
    if (quotas) cleanups.push(() => quotas.close());
    let metrics: ServiceMetrics | undefined;
    const logEngine = engineLog(logger);
    // The warm-up's session and calls are the process's own: neither logged nor counted.
    const warmer = warmUpCaller();
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
    const engine = new REngine({
      config: config.r,
      dataDir: config.dataDir,
      sessionsDir,
      isolated: isolation.isolated,
      log,
      newSessionId: () => taggedSessionId(peers.selfTag),
      ...(quotas ? { quotas } : {}),
      network,
      ...sessionView(config, isolation.isolated, logger),
      ...(config.packages.library ? { library: config.packages.library } : {}),
      sessionInstalls: config.packages.sessionInstalls,
      repos: config.packages.repos,
      shareInstalls: (id, subject) => (library, names, owner) => packages.share(library, names, owner, `R session ${id} of ${subject}`),
      onEvent: (event) => {
        if ("user" in event && event.user === warmer) return;
        logEngine(event);
        metrics?.recordEngine(event);
      },
    });
    // Before the port opens: a session the previous run saved is never answered 404.
    await engine.restoreSessions();
    // After the engine: its gauges read it.
    if (config.metrics.enabled) {
      metrics = new ServiceMetrics({
        sessions: () => sessionCounts(engine),
        sessionNetwork: engine.sessionNetwork,
        ...(quotas ? { sessionsUsage: () => ({ memoryBytes: quotas.memoryBytes(), cpuSeconds: quotas.cpuSeconds() }) } : {}),
      });
    }
    const callSinks = [...(config.log.level === "silent" ? [] : [accessLog(logger)]), ...(metrics ? [metrics.recordCall] : [])].map(
      (sink) => (record: CallRecord) => (record.user === warmer ? undefined : sink(record)),
    );
    // Rock unregisters once R stopped: the cleanups run in reverse, so this one after the engine's.
    let opal: OpalRegistration | undefined;
    cleanups.push(() => opal?.stop());
    cleanups.push(() => engine.close());
    // One LevelDB, one writer: a node whose catalogue another serves opens none.
    const catalogNode = peers.catalogue();
    let networkHandlers: ServiceImpl<typeof NetworkService>;
    if (catalogNode) networkHandlers = catalogueServedElsewhere(catalogNode.id);
    else {
      const catalog = await NetworkCatalog.open(path.join(config.dataDir, "networks"));
      cleanups.push(() => catalog.close());
      networkHandlers = createNetworkServiceHandlers(catalog);
    }
    let ready = false;
    const lifecycle = new ServiceLifecycle({ drainMs: config.server.drainSeconds * 1000, busy: () => engine.busy });
    protectDataFolder(config.dataDir, [sessionsDir, ...(config.packages.library ? [config.packages.library] : [])]);
    const { library } = config.packages;
    if (isolation.isolated && library && fs.existsSync(library) && !listableByOthers(library)) {
      // R drops from .libPaths() a library it cannot read: sessions would silently load none of it.
      logger.warn(
        `packages.library ${library} cannot be read by isolated sessions (it needs o+rx, and o+x on every folder above it): sessions load none of its packages`,
      );
    }

    // With peers, each handler passes on the calls another node must serve (after every interceptor:
    // only callers this node authenticated are passed on).
    const forward =
      config.cluster.peers.length > 0 ? forwardingMethods(config.node.id, peers.others(), clusterRoute(peers), clusterFanOut) : undefined;
    const clustered = (services: RegisteredService[]): RegisteredService[] =>
      forward ? services.map((s) => wrapMethods(s, forward)) : services;
    const server = await startServer({
      port: config.port,
      host: config.host,
      tls,
      services: clustered([
        registerService(
          RService,
          createRServiceHandlers({
            engine,
            node: config.node,
            r: config.r,
            maxUploadBytes: config.limits.maxUploadBytes,
            maxAssignBytes: config.limits.maxAssignBytes,
            maxBodyBytes: config.limits.maxBodyBytes,
            packages,
            ready: () => ready,
          }),
          restStyleOf(RService),
        ),
        registerService(NetworkService, networkHandlers, restStyleOf(NetworkService)),
      ]),
      interceptors: [
        // Nothing reads the calls with the log silent and metrics off: not even timed then.
        ...(callSinks.length === 0
          ? []
          : [
              callObserver({ namesSession: (m) => m.parent === RService && m.input.fields.some((f) => f.name === "id"), sinks: callSinks }),
            ]),
        // Outside the drain gate and authentication, so that their refusals are faults too; inside
        // the observer, which records the answer the client gets.
        faultConversion,
        drainGate(lifecycle, drainPolicy),
        authInterceptor(users, config.auth.securityEnabled ? undefined : networkMatcher(config.auth.openNetworks, "auth.openNetworks")),
      ],
      maxBodyBytes: config.limits.maxBodyBytes,
      // A REST body streamed to a client-streaming RPC (an upload, an assign): each handler keeps its own limit.
      maxUploadBytes: Math.max(config.limits.maxUploadBytes, config.limits.maxAssignBytes),
      timeouts: config.limits,
      logger,
      serving: lifecycle,
      metrics: { registry: metrics?.registry ?? METRICS_OFF, users },
      unaryFastPath: config.server.unaryFastPath,
      clientAddress: clientAddressOf(networkMatcher(config.server.trustedProxies, "server.trustedProxies")),
    });
    cleanups.push(() => server.close());
    // Without R the catalogue still serves; /_check then answers 500 until R runs.
    // A failed start is logged by the engine's event.
    await engine.boot().catch(() => undefined);
    if (config.server.warmUpCalls > 0 && engine.running) await warmUpService(config, users, server, warmer, logger);
    ready = true;
    // Opal places sessions on the node once it is registered: once it is ready.
    opal = opalRegistration(config, logger, metrics);
    opal?.start();
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

/** A name no user has (user names come from the configuration): the warm-up's calls are told apart by it. */
function warmUpCaller(): string {
  return `warm-up ${randomUUID()}`;
}

/**
 * The service's own first calls (src/server/warm-up.ts), as a caller that exists only meanwhile. A
 * warm-up that fails is said and the service starts anyway: it would only have made calls faster.
 */
async function warmUpService(config: Config, users: UserDirectory, server: RunningServer, name: string, logger: Logger): Promise<void> {
  const grant = users.grant(name, ["user"]);
  try {
    const outcome = await warmUp({
      calls: config.server.warmUpCalls,
      openDoor: (socketPath) => server.openLocal(socketPath),
      credentials: grant,
      timeoutMs: WARM_UP_TIMEOUT_MS,
    });
    logger.info("warmed up", { calls: outcome.calls, ms: outcome.ms });
  } catch (e) {
    logger.warn("warm-up failed; serving anyway, the first calls slower", { error: (e as Error).message });
  } finally {
    grant.revoke();
  }
}

function sessionCounts(engine: REngine): { total: number; busy: number; suspended: number } {
  const sessions = engine.sessions();
  return { total: sessions.length, busy: sessions.filter((s) => s.busy).length, suspended: sessions.filter((s) => s.suspended).length };
}

/** auth.securityEnabled false is never silent: said at every start, with whom it opens the service to. */
function securityWarnings(config: Config): string[] {
  if (config.auth.securityEnabled) return [];
  if (config.auth.openNetworks.length === 0) {
    return [
      "ROCK_SECURITY_ENABLED=false alone changes nothing: every call still needs credentials. To serve calls without credentials from a trusted network only (a pod network), also set ROCK_SECURITY_OPEN_NETWORKS (docs/security.md, Security model)",
    ];
  }
  return [
    `AUTHENTICATION IS OFF for clients in ${config.auth.openNetworks.join(", ")} (ROCK_SECURITY_ENABLED=false): they are served as an administrator of the R service without credentials; every other client authenticates`,
  ];
}

/** The node's registration with Opal when opal.server is set and the node has a public URL to be called back at. */
function opalRegistration(config: Config, logger: Logger, metrics: ServiceMetrics | undefined): OpalRegistration | undefined {
  const { opal, node } = config;
  if (opal.server === "") return undefined;
  if (node.publicUrl === undefined) {
    logger.warn(
      "ROCK_OPAL_SERVER is set but not ROCK_SERVER (node.publicUrl), the URL Opal calls this node at: not registering with Opal",
      { opal: opal.server },
    );
    return undefined;
  }
  const log = registrationLog(logger, opal.server, opal.retrySeconds);
  return new OpalRegistration({
    opal: opal.server,
    token: opal.token,
    app: { name: node.id, cluster: node.cluster, tags: node.tags, server: node.publicUrl },
    retryMs: opal.retrySeconds * 1000,
    refreshMs: opal.refreshSeconds * 1000,
    onOutcome: (outcome) => {
      log(outcome);
      metrics?.recordRegistration(outcome);
    },
  });
}
