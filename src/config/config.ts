/** The whole configuration, after defaults, the YAML file and environment overrides were applied. */
export interface Config {
  /** Listening port for every protocol (gRPC, gRPC-Web, Connect, REST). */
  readonly port: number;
  readonly host: string;
  /** Certificate and key of the port; set, it speaks HTTPS only. */
  readonly tls: TlsConfig;
  /** Where LevelDB, sessions' folders, the console log and generated secrets live. */
  readonly dataDir: string;
  readonly node: NodeConfig;
  /** The YAML file the configuration was read from, if any (its permissions are checked at start). */
  readonly configFile?: string;
  /** Users from the configuration; empty means "create an administrator on first start". */
  readonly users: readonly UserConfig[];
  readonly r: RConfig;
  readonly packages: PackagesConfig;
  readonly limits: LimitsConfig;
  readonly auth: AuthConfig;
  readonly server: ServerConfig;
  readonly log: LogConfig;
  readonly metrics: MetricsConfig;
  readonly opal: OpalConfig;
  readonly cluster: ClusterConfig;
  /**
   * What the configuration accepted but this server does differently (Rock's variables without an
   * equivalent here): said as warnings at start.
   */
  readonly warnings: readonly string[];
}

/** Several nodes behind one address (docs/operations.md, "Several nodes"). */
export interface ClusterConfig {
  /**
   * The nodes of the cluster as `id=url` (this node's own entry may be listed): a call for a session
   * another of them holds, or for the catalogue, is passed on to it. Empty: the node stands alone.
   */
  readonly peers: readonly string[];
  /** The id of the node that serves the catalogue (one LevelDB, one writer); empty: this node. */
  readonly catalogNode: string;
}

/** Self-registration with Opal (Rock 2.x's `opal.*`), docs/operations.md "Several nodes". */
export interface OpalConfig {
  /** Opal's base URL; set, the node registers itself there (it needs node.publicUrl to). Empty: no registration. */
  readonly server: string;
  /** Opal's application token, sent as X-App-Auth; empty: the header is not sent. */
  readonly token: string;
  /** After a failed attempt, the wait before the next one. */
  readonly retrySeconds: number;
  /**
   * After a registration, the wait before registering again: Opal keeps one entry per node, and drops a
   * node whose call-back failed, which comes back this way.
   */
  readonly refreshSeconds: number;
}

export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
export type LogFormat = "json" | "pretty";

/** The service log (stderr), not R's console log. */
export interface LogConfig {
  /** `info` has one access line per call and the lifecycle; `warn` drops both. */
  readonly level: LogLevel;
  /** `json`: one JSON object per line, for collectors; `pretty`: for a person (needs pino-pretty, a dev dependency). */
  readonly format: LogFormat;
  /** How long info lines may wait to be written together (0: each at once); warnings and errors never wait. */
  readonly flushMs: number;
}

export interface MetricsConfig {
  /** false: no metric is kept and GET /metrics answers 404 (what the bench measures the metrics' cost against). */
  readonly enabled: boolean;
}

export interface ServerConfig {
  /**
   * On SIGTERM or SIGINT, how long calls already running may take to finish before the service stops
   * anyway (see docs/operations.md, "Stopping and starting"); <= 0: stop at once.
   */
  readonly drainSeconds: number;
  /**
   * Unary RPCs over gRPC, gRPC-Web and Connect are served by this server's own unary fast path (src/transport/protocols/rpc/);
   * false hands every RPC to Connect-ES (the reference the fast path is tested against).
   */
  readonly unaryFastPath: boolean;
  /**
   * Evaluations the service makes through its own code paths at start (src/server/warm-up.ts), before
   * /_check says ready; 0: none.
   */
  readonly warmUpCalls: number;
  /**
   * Proxies (CIDR) whose X-Forwarded-For names the client (a load balancer): failed logins and
   * auth.openNetworks then count the client, not the proxy. Empty: the socket's address, always.
   */
  readonly trustedProxies: readonly string[];
}

/** Both set: the port speaks HTTPS only (h2 and http/1.1 by ALPN); both empty: cleartext only. */
export interface TlsConfig {
  /** PEM file of the certificate chain, the server's certificate first. */
  readonly cert: string;
  /** PEM file of its private key, unencrypted. */
  readonly key: string;
}

export interface NodeConfig {
  readonly id: string;
  /** Shown by /_info as `name`; the id when unset. */
  readonly name?: string;
  readonly cluster: string;
  readonly tags: readonly string[];
  /** Public base URL announced by /_info (`server`), when set. */
  readonly publicUrl?: string;
}

export interface UserConfig {
  readonly name: string;
  /** Plain text, `{noop}plain`, `{bcrypt}$2…`, or Spring Security's `{pbkdf2}…` / `{scrypt}$…` (src/config/secret-format.js). */
  readonly secret: string;
  readonly roles: readonly string[];
}

export interface RConfig {
  /** R executable (found on PATH by default). */
  readonly executable: string;
  /** Start the R server process when the service starts. */
  readonly startOnBoot: boolean;
  /** Restart the R server process when it dies unexpectedly. */
  readonly autoRestart: boolean;
  /** Close sessions idle for longer than this; <= 0 disables. */
  readonly sessionTimeoutMinutes: number;
  /** How often idle sessions are looked for. */
  readonly sessionCheckSeconds: number;
  /** Suspend sessions idle for this long; <= 0: never on idle. */
  readonly suspendIdleMinutes: number;
  /** Save the state of a session R changed once it is idle this long, its process living on; <= 0: never. */
  readonly checkpointIdleSeconds: number;
  /** The saved states together, MiB; 0: a quarter of the data folder's file system. */
  readonly suspendedMaxMb: number;
  /** Interrupt an evaluation running longer than this; <= 0 disables. */
  readonly maxEvalSeconds: number;
  /** Upper bound of `wait=true` on commands and results. */
  readonly commandWaitSeconds: number;
  /** Console log file is rotated past this size. */
  readonly logMaxBytes: number;
  /** How many rotated console log files are kept. */
  readonly logFiles: number;
  readonly encoding: string;
  /**
   * `auto`: under root every session runs as its own unprivileged uid (isolated); otherwise sessions run
   * as the service's user, with a loud warning. `required`: refuse to start unless sessions are isolated.
   */
  readonly isolation: IsolationMode;
  /** The uids (each with the same gid) sessions run as when isolated (`first-last` in the file and the environment). */
  readonly sessionUids: UidRange;
  /**
   * Where an isolated service locks its `sessionUids` (`uids-<first>-<last>.lock`) for as long as it
   * runs: every server of a host must use the same folder. Default `/run/rock-ts`.
   */
  readonly lockDir: string;
  /**
   * Where sessions' folders live; empty: `<dataDir>/sessions`, or a folder under the system's temporary
   * folder when an isolated session could not reach the data folder (an ancestor without `o+x`).
   */
  readonly sessionsDir: string;
  /**
   * Where the start installs the R packages the service needs (jsonlite; unix when sessions are
   * isolated) when R's own libraries lack them; appended to the R server's and package operations'
   * `.libPaths()`, so it only fills gaps. Default: `r-library/` in the checkout.
   */
  readonly setupLibrary: string;
  /**
   * `auto`: isolated sessions get a control group each (memory, CPU, processes) where the host lets the
   * service make them, else the rlimits alone, said at start; `required`: refuse to start without them;
   * `off`: the rlimits alone.
   */
  readonly quotas: QuotaMode;
  /**
   * `private`: each isolated session sees /tmp, /var/tmp and /dev/shm of its own (a mount namespace,
   * empty at its start, gone at its end) where the service may make one (CAP_SYS_ADMIN), said at start
   * otherwise; `shared`: the host's.
   */
  readonly sessionTmp: SessionTmpMode;
  /**
   * `restricted`: each isolated session in a network namespace of its own whose traffic leaves through
   * a router the service filters (no address of the host, none link-local, none of
   * `sessionNetworkDeny`; names through the host's resolvers; everything else reached); `auto`:
   * `restricted` where it can be enforced, else `host` with a warning; `host`: sessions open any
   * connection the host can; `none`: each isolated session in a network namespace of its own, loopback
   * only. Package installs run apart from sessions and keep the host's network.
   */
  readonly sessionNetwork: SessionNetworkMode;
  /** With `restricted`: destinations sessions reach whatever else says, checked first. */
  readonly sessionNetworkAllow: readonly string[];
  /** With `restricted`: destinations sessions are refused besides the host's and link-local addresses. */
  readonly sessionNetworkDeny: readonly string[];
  /**
   * `minimal`: each isolated session sees only what R needs of the host's files (a root of its own,
   * where the service may make mount namespaces); `host`: the host's whole file system.
   */
  readonly sessionFilesystem: "minimal" | "host";
  /** All sessions' memory together (with quotas), MiB; <= 0: no budget. Default: 3/4 of the host's memory. */
  readonly sessionsMemoryMb: number;
  /** Each session's CPU in cores at most (with quotas); <= 0: no cap, sessions share by equal weight. */
  readonly sessionCpuCores: number;
  /**
   * Each session's memory in MiB: with quotas its real memory, swap included, all its processes
   * together (a session past it is ended alone); without, each process's address space (RLIMIT_AS).
   * <= 0: no limit.
   */
  readonly sessionMemoryMb: number;
  /** Processes each isolated session may run at once (RLIMIT_NPROC of its uid); <= 0: no limit. */
  readonly sessionProcesses: number;
  /** Sessions open at once, all users together; <= 0: no limit. */
  readonly maxSessions: number;
  /** Sessions open at once per user; <= 0: no limit. */
  readonly maxSessionsPerUser: number;
  /**
   * Session processes kept forked ahead of demand, so that creating a session hands one over instead of
   * forking; 0: none. Bounded by what r.maxSessions and the free uids of r.sessionUids leave.
   */
  readonly spareSessions: number;
  /** CPU time one evaluation may use before it is interrupted; <= 0: no limit. */
  readonly maxEvalCpuSeconds: number;
  /** After an interrupt the service sent, how long R has to come back before the session is killed. */
  readonly interruptGraceSeconds: number;
  /**
   * A file of R code the R server runs before it forks any session (packages loaded once, options), as
   * the service's user: trusted configuration. Empty: none.
   */
  readonly profile: string;
  /** While the R server starts, how long a call that needs it waits before it is answered 503. */
  readonly startWaitSeconds: number;
}

export type IsolationMode = "auto" | "required";
export type QuotaMode = "auto" | "required" | "off";
export type SessionTmpMode = "private" | "shared";
export type SessionNetworkMode = "auto" | "restricted" | "host" | "none";

/** A destination of r.sessionNetworkAllow / Deny: an IPv4 network, and a port when only that one is meant (TCP and UDP). */
export interface Destination {
  readonly address: string;
  readonly prefix: number;
  readonly port?: number;
}

/** Unprivileged uids, first to last: 0 < first <= last < 2^32 - 1. */
export interface UidRange {
  readonly first: number;
  readonly last: number;
}

export type SessionInstalls = "auto" | "private" | "none";

export interface PackagesConfig {
  /**
   * Repositories for install.packages / update.packages (and the start's own installs); empty: R's
   * own `getOption("repos")` (a site mirror or package manager), else https://cloud.r-project.org.
   */
  readonly repos: readonly string[];
  /** Base URL of the git host (GitHub-compatible) for the `git` manager. */
  readonly gitHost: string;
  /** Organisation used when a git package name has no `org/`. */
  readonly gitOrganization: string;
  /**
   * Library that package operations install into and that R sessions search first; empty: R's own
   * first library (`.libPaths()[1]`).
   */
  readonly library: string;
  /**
   * Where `install.packages()` and the like write from an R session: `auto`, a session of a user who
   * may install through the API (administrator, manager) into `library` for every later session, any
   * other into a library of its own; `private`, every session into its own; `none`: refused.
   */
  readonly sessionInstalls: SessionInstalls;
  /** Longest a package operation may run before it is stopped; 0: no limit. */
  readonly timeoutSeconds: number;
}

export interface LimitsConfig {
  /** Largest request body accepted by REST and RPC calls (413 past it); uploads and streamed assigns excepted. */
  readonly maxBodyBytes: number;
  /** Largest uploaded file. */
  readonly maxUploadBytes: number;
  /** Largest body of an assign (its value, as sent: base64, a serialization or a script). */
  readonly maxAssignBytes: number;
  /**
   * A connection with nothing in flight is closed past it: before its first byte, between HTTP/1.1
   * requests (keep-alive), an HTTP/2 session without an open stream (GOAWAY).
   */
  readonly idleTimeoutSeconds: number;
  /** From a request's first byte to the end of its headers; for HTTP/2, of the SETTINGS exchange. */
  readonly headersTimeoutSeconds: number;
  /** Longest time to receive the body of a request that is not an upload or a client stream (408 / reset). */
  readonly requestTimeoutSeconds: number;
  /** Longest pause in a request body still arriving, uploads and client streams included (408 / reset). */
  readonly bodyIdleTimeoutSeconds: number;
}

export interface AuthConfig {
  /** Failed logins from one client address within the window before its attempts get 429; <= 0: no limit. */
  readonly maxFailures: number;
  /** The window opens with a client's first failure; its attempts are refused until it ends. */
  readonly failureWindowSeconds: number;
  /** Client addresses whose failures are remembered at once (the oldest are forgotten past it). */
  readonly trackedClients: number;
  /** Threads checking passwords; <= 0: one per core but one. */
  readonly hashWorkers: number;
  /** Password checks that may wait for a thread; past it attempts get 429. */
  readonly hashQueue: number;
  /**
   * false (Rock's ROCK_SECURITY_ENABLED=false, as Opal's Kubernetes pods set it): calls from the
   * addresses of `openNetworks` are served without checking credentials, as an administrator; every
   * other caller still authenticates. Never open to anyone else.
   */
  readonly securityEnabled: boolean;
  /** Client networks (CIDR, IPv4 or IPv6) served without credentials when securityEnabled is false. */
  readonly openNetworks: readonly string[];
}
