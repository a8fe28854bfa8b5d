import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import { parseNetwork } from "../auth/open-networks.js";
import { parsePeers, PeerTable } from "../cluster/peers.js";
import { parseSecret } from "../auth/secret-format.js";
import type { Config, IsolationMode, LogFormat, LogLevel, QuotaMode, RConfig, SessionTmpMode, UserConfig } from "./config.js";

/** Every setting has a default: the server runs with no file and no environment. */
export function defaults(): Config {
  return {
    port: 8085,
    host: "0.0.0.0",
    tls: { cert: "", key: "" },
    dataDir: path.resolve("data"),
    node: { id: `rock-${os.hostname()}`, name: undefined, cluster: "default", tags: [], publicUrl: undefined },
    users: [],
    r: {
      executable: "R",
      startOnBoot: true,
      autoRestart: true,
      sessionTimeoutMinutes: 240,
      sessionCheckSeconds: 600,
      maxEvalSeconds: 0,
      commandWaitSeconds: 300,
      logMaxBytes: 10 * 1024 * 1024,
      logFiles: 5,
      encoding: "UTF-8",
      isolation: "auto",
      sessionUids: "70000-70999",
      sessionsDir: "",
      setupLibrary: fileURLToPath(new URL("../../r-library", import.meta.url)),
      quotas: "auto",
      sessionTmp: "private",
      sessionNetwork: "host",
      sessionFilesystem: "minimal",
      sessionsMemoryMb: Math.floor((os.totalmem() / 1048576) * 0.75),
      sessionCpuCores: 0,
      sessionMemoryMb: 4096,
      sessionProcesses: 64,
      maxSessions: 100,
      maxSessionsPerUser: 10,
      spareSessions: 8,
      maxEvalCpuSeconds: 0,
      interruptGraceSeconds: 5,
      profile: "",
      startWaitSeconds: 30,
    },
    packages: { repos: [], gitHost: "https://github.com", gitOrganization: "datashield", library: "", timeoutSeconds: 3600 },
    limits: {
      maxBodyBytes: 64 * 1024 * 1024,
      maxUploadBytes: 16 * 1024 * 1024 * 1024,
      idleTimeoutSeconds: 65,
      headersTimeoutSeconds: 20,
      requestTimeoutSeconds: 300,
      bodyIdleTimeoutSeconds: 60,
    },
    auth: { maxFailures: 10, failureWindowSeconds: 60, trackedClients: 10_000, hashWorkers: 0, hashQueue: 32, securityEnabled: true, openNetworks: [] },
    server: { drainSeconds: 30, unaryFastPath: true, trustedProxies: [] },
    log: { level: "info", format: "json" },
    metrics: { enabled: true },
    opal: { server: "", token: "", retrySeconds: 10, refreshSeconds: 60 },
    cluster: { peers: [], catalogNode: "" },
    warnings: [],
  };
}

type Env = Readonly<Record<string, string | undefined>>;

/** Defaults, then the YAML file (`file`, else ROCK_CONFIG), then ROCK_* environment variables. */
export function loadConfig(file?: string, env: Env = process.env): Config {
  const known = knownEnv(env);
  let config = defaults();
  const source = preferred(file, known.env.ROCK_CONFIG);
  if (source) {
    const file = readYaml(source);
    // What loading found, not a setting.
    if ("warnings" in file) throw new Error(`${source}: unknown setting 'warnings'`);
    config = { ...merge(config, file, source), configFile: path.resolve(source) };
  }
  config = applyEnv(config, known.env);
  known.refuseUnread();
  return validate(config);
}

/**
 * The environment as applyEnv reads it. A variable set to "" counts as unset (what a compose file's
 * `${VAR}` of an unset VAR gives). Every name read is noted: whatever other ROCK_* variable is set is
 * a typo or a setting this server does not have, and is refused rather than silently ignored.
 */
function knownEnv(raw: Env): { readonly env: Env; refuseUnread(): void } {
  const read = new Set<string>();
  const env = new Proxy(raw, {
    get(target, name) {
      if (typeof name !== "string") return undefined;
      read.add(name);
      return target[name] === "" ? undefined : target[name];
    },
  });
  return {
    env,
    refuseUnread() {
      const unknown = Object.keys(raw).filter((k) => k.startsWith("ROCK_") && !read.has(k)).sort();
      if (unknown.length > 0) {
        throw new Error(`unknown environment variable${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")} (README, Configuration, lists them all)`);
      }
    },
  };
}

function readYaml(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (e) {
    throw new Error(`${file}: cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  const doc: unknown = parseYaml(text);
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) throw new Error(`${file}: the configuration must be a mapping`);
  return doc as Record<string, unknown>;
}

/** Deep merge that checks every key against the defaults, so a typo is an error, not a silent default. */
function merge<T>(base: T, over: unknown, where: string): T {
  if (over === undefined || over === null) return base;
  if (Array.isArray(base)) {
    if (!Array.isArray(over)) throw new Error(`${where}: expected a list`);
    return over as T;
  }
  if (typeof base === "object" && base !== null) {
    if (typeof over !== "object" || Array.isArray(over)) throw new Error(`${where}: expected a mapping`);
    const out: Record<string, unknown> = { ...(base as Record<string, unknown>) };
    for (const [k, v] of Object.entries(over as Record<string, unknown>)) {
      if (!(k in out)) throw new Error(`${where}: unknown setting '${k}'`);
      out[k] = k === "users" ? parseUsers(v, `${where}.users`) : merge(out[k], v, `${where}.${k}`);
    }
    return out as T;
  }
  if (typeof base === "number") {
    // Number(true) is 1 and Number("") is 0: neither is a number the file meant.
    const n = typeof over === "number" || (typeof over === "string" && over.trim() !== "") ? Number(over) : NaN;
    if (!Number.isFinite(n)) throw new Error(`${where}: expected a number`);
    return n as T;
  }
  if (typeof base === "boolean") {
    if (typeof over === "boolean") return over as T;
    if (/^(true|false)$/i.test(String(over))) return (String(over).toLowerCase() === "true") as T;
    throw new Error(`${where}: expected true or false`);
  }
  return String(over) as T;
}

function parseUsers(v: unknown, where: string): UserConfig[] {
  if (!Array.isArray(v)) throw new Error(`${where}: expected a list of {name, secret, roles}`);
  return v.map((u, i) => {
    const o = u as Partial<Record<keyof UserConfig, unknown>>;
    if (typeof o?.name !== "string" || typeof o.secret !== "string") throw new Error(`${where}[${i}]: name and secret are required`);
    const roles = Array.isArray(o.roles) ? o.roles.map(String) : typeof o.roles === "string" ? o.roles.split(",").map((r) => r.trim()) : [];
    return user(o.name, o.secret, roles, `${where}[${i}]`);
  });
}

/** A user whose secret this server can check: a `{…}` prefix it does not know stops the start, naming the user. */
function user(name: string, secret: string, roles: string[], where: string): UserConfig {
  try {
    parseSecret(secret);
  } catch (e) {
    throw new Error(`${where} (user '${name}'): ${(e as Error).message}`);
  }
  return { name, secret, roles };
}

/** Rock's container variables: each `<prefix>_NAME` / `<prefix>_PASSWORD` pair is one user of the role. */
const ROLE_VARIABLES = [
  ["ROCK_ADMINISTRATOR", "administrator"],
  ["ROCK_MANAGER", "manager"],
  ["ROCK_USER", "user"],
] as const;

/** The users with Rock's pairs added; a user of the same name is replaced (the environment overrides the file). */
function withRoleUsers(users: readonly UserConfig[], env: Env): UserConfig[] {
  const pairs: UserConfig[] = [];
  const named = new Map<string, string>();
  for (const [prefix, role] of ROLE_VARIABLES) {
    const name = env[`${prefix}_NAME`];
    const secret = env[`${prefix}_PASSWORD`];
    if (name === undefined && secret === undefined) continue;
    // Rock's image falls back to the password "password"; a half-configured user is refused instead.
    if (name === undefined) throw new Error(`${prefix}_PASSWORD is set but ${prefix}_NAME is not`);
    if (secret === undefined) throw new Error(`${prefix}_NAME is set but ${prefix}_PASSWORD is not`);
    const earlier = named.get(name);
    if (earlier) throw new Error(`${prefix}_NAME: user '${name}' is already ${earlier}`);
    named.set(name, `${prefix}_NAME`);
    pairs.push(user(name, secret, [role], `${prefix}_PASSWORD`));
  }
  return [...users.filter((u) => !named.has(u.name)), ...pairs];
}

/**
 * ROCK_USERS: `name:secret:role,role;name:secret:role` (a secret may hold ':'; the hashed forms hold
 * neither ';' nor ',').
 */
function envUsers(text: string): UserConfig[] {
  return text
    .split(";")
    .filter((s) => s.trim())
    .map((entry) => {
      const first = entry.indexOf(":");
      const last = entry.lastIndexOf(":");
      if (first <= 0 || last === first) throw new Error("ROCK_USERS: expected name:secret:roles entries separated by ';'");
      const roles = entry.slice(last + 1).split(",").map((r) => r.trim()).filter(Boolean);
      return user(entry.slice(0, first).trim(), entry.slice(first + 1, last), roles, "ROCK_USERS");
    });
}

function applyEnv(c: Config, env: Env): Config {
  const num = (name: string, fallback: number) => {
    const v = env[name];
    if (v === undefined) return fallback;
    const n = v.trim() === "" ? NaN : Number(v);
    if (!Number.isFinite(n)) throw new Error(`${name}: expected a number, not '${v}'`);
    return n;
  };
  const bool = (name: string, fallback: boolean) => {
    const v = env[name];
    if (v === undefined) return fallback;
    if (/^(true|1|yes)$/i.test(v)) return true;
    if (/^(false|0|no)$/i.test(v)) return false;
    throw new Error(`${name}: expected true or false, not '${v}'`);
  };
  const list = (name: string, fallback: readonly string[]) =>
    env[name] === undefined ? fallback : env[name]!.split(",").map((s) => s.trim()).filter(Boolean);
  return {
    ...c,
    port: num("ROCK_PORT", c.port),
    host: env.ROCK_HOST ?? c.host,
    tls: { cert: resolvedOrEmpty(env.ROCK_TLS_CERT ?? c.tls.cert), key: resolvedOrEmpty(env.ROCK_TLS_KEY ?? c.tls.key) },
    dataDir: path.resolve(env.ROCK_DATA_DIR ?? env.ROCK_HOME ?? c.dataDir),
    node: {
      ...c.node,
      id: preferred(env.ROCK_NODE_ID, env.ROCK_ID) ?? c.node.id,
      name: env.ROCK_NODE_NAME ?? c.node.name,
      cluster: env.ROCK_CLUSTER ?? c.node.cluster,
      tags: list("ROCK_TAGS", c.node.tags),
      publicUrl: preferred(env.ROCK_PUBLIC_URL, env.ROCK_SERVER) ?? c.node.publicUrl,
    },
    users: withRoleUsers(env.ROCK_USERS !== undefined ? envUsers(env.ROCK_USERS) : c.users, env),
    r: {
      ...c.r,
      executable: env.ROCK_R_EXECUTABLE ?? c.r.executable,
      startOnBoot: bool("ROCK_R_START", c.r.startOnBoot),
      autoRestart: bool("ROCK_R_AUTO_RESTART", c.r.autoRestart),
      sessionTimeoutMinutes: num("ROCK_SESSION_TIMEOUT", c.r.sessionTimeoutMinutes),
      sessionCheckSeconds: num("ROCK_R_SESSION_CHECK_SECONDS", c.r.sessionCheckSeconds),
      maxEvalSeconds: num("ROCK_MAX_EVAL_SECONDS", c.r.maxEvalSeconds),
      commandWaitSeconds: num("ROCK_R_COMMAND_WAIT_SECONDS", c.r.commandWaitSeconds),
      logMaxBytes: num("ROCK_R_LOG_MAX_BYTES", c.r.logMaxBytes),
      logFiles: num("ROCK_R_LOG_FILES", c.r.logFiles),
      encoding: env.ROCK_R_ENCODING ?? c.r.encoding,
      isolation: (env.ROCK_R_ISOLATION ?? c.r.isolation) as IsolationMode,
      sessionUids: env.ROCK_R_SESSION_UIDS ?? c.r.sessionUids,
      sessionsDir: env.ROCK_R_SESSIONS_DIR ?? c.r.sessionsDir,
      setupLibrary: path.resolve(env.ROCK_R_SETUP_LIBRARY ?? c.r.setupLibrary),
      quotas: (env.ROCK_R_QUOTAS ?? c.r.quotas) as QuotaMode,
      sessionTmp: (env.ROCK_R_SESSION_TMP ?? c.r.sessionTmp) as SessionTmpMode,
      sessionNetwork: (env.ROCK_R_SESSION_NETWORK ?? c.r.sessionNetwork) as RConfig["sessionNetwork"],
      sessionFilesystem: (env.ROCK_R_SESSION_FILESYSTEM ?? c.r.sessionFilesystem) as RConfig["sessionFilesystem"],
      sessionsMemoryMb: num("ROCK_R_SESSIONS_MEMORY_MB", c.r.sessionsMemoryMb),
      sessionCpuCores: num("ROCK_R_SESSION_CPU_CORES", c.r.sessionCpuCores),
      sessionMemoryMb: num("ROCK_R_SESSION_MEMORY_MB", c.r.sessionMemoryMb),
      sessionProcesses: num("ROCK_R_SESSION_PROCESSES", c.r.sessionProcesses),
      maxSessions: num("ROCK_R_MAX_SESSIONS", c.r.maxSessions),
      maxSessionsPerUser: num("ROCK_R_MAX_SESSIONS_PER_USER", c.r.maxSessionsPerUser),
      spareSessions: num("ROCK_R_SPARE_SESSIONS", c.r.spareSessions),
      maxEvalCpuSeconds: num("ROCK_MAX_EVAL_CPU_SECONDS", c.r.maxEvalCpuSeconds),
      interruptGraceSeconds: num("ROCK_R_INTERRUPT_GRACE_SECONDS", c.r.interruptGraceSeconds),
      profile: resolvedOrEmpty(env.ROCK_R_PROFILE ?? c.r.profile),
      startWaitSeconds: num("ROCK_R_START_WAIT_SECONDS", c.r.startWaitSeconds),
    },
    packages: {
      ...c.packages,
      repos: list("ROCK_REPOS", c.packages.repos),
      gitHost: env.ROCK_GIT_HOST ?? c.packages.gitHost,
      gitOrganization: env.ROCK_GIT_ORG ?? c.packages.gitOrganization,
      library: env.ROCK_R_LIBRARY ?? c.packages.library,
      timeoutSeconds: num("ROCK_PACKAGES_TIMEOUT_SECONDS", c.packages.timeoutSeconds),
    },
    limits: {
      maxBodyBytes: num("ROCK_MAX_BODY_BYTES", c.limits.maxBodyBytes),
      maxUploadBytes: num("ROCK_MAX_UPLOAD_BYTES", c.limits.maxUploadBytes),
      idleTimeoutSeconds: num("ROCK_IDLE_TIMEOUT_SECONDS", c.limits.idleTimeoutSeconds),
      headersTimeoutSeconds: num("ROCK_HEADERS_TIMEOUT_SECONDS", c.limits.headersTimeoutSeconds),
      requestTimeoutSeconds: num("ROCK_REQUEST_TIMEOUT_SECONDS", c.limits.requestTimeoutSeconds),
      bodyIdleTimeoutSeconds: num("ROCK_BODY_IDLE_TIMEOUT_SECONDS", c.limits.bodyIdleTimeoutSeconds),
    },
    auth: {
      maxFailures: num("ROCK_AUTH_MAX_FAILURES", c.auth.maxFailures),
      failureWindowSeconds: num("ROCK_AUTH_FAILURE_WINDOW_SECONDS", c.auth.failureWindowSeconds),
      trackedClients: num("ROCK_AUTH_TRACKED_CLIENTS", c.auth.trackedClients),
      hashWorkers: num("ROCK_AUTH_HASH_WORKERS", c.auth.hashWorkers),
      hashQueue: num("ROCK_AUTH_HASH_QUEUE", c.auth.hashQueue),
      securityEnabled: bool("ROCK_SECURITY_ENABLED", c.auth.securityEnabled),
      openNetworks: list("ROCK_SECURITY_OPEN_NETWORKS", c.auth.openNetworks),
    },
    server: {
      drainSeconds: num("ROCK_DRAIN_SECONDS", c.server.drainSeconds),
      unaryFastPath: bool("ROCK_UNARY_FAST_PATH", c.server.unaryFastPath),
      trustedProxies: list("ROCK_TRUSTED_PROXIES", c.server.trustedProxies),
    },
    log: { level: (env.ROCK_LOG_LEVEL ?? c.log.level) as LogLevel, format: (env.ROCK_LOG_FORMAT ?? c.log.format) as LogFormat },
    metrics: { enabled: bool("ROCK_METRICS_ENABLED", c.metrics.enabled) },
    opal: {
      server: env.ROCK_OPAL_SERVER ?? c.opal.server,
      token: env.ROCK_OPAL_TOKEN ?? c.opal.token,
      retrySeconds: num("ROCK_OPAL_RETRY_SECONDS", c.opal.retrySeconds),
      refreshSeconds: num("ROCK_OPAL_REFRESH_SECONDS", c.opal.refreshSeconds),
    },
    cluster: { peers: list("ROCK_PEERS", c.cluster.peers), catalogNode: env.ROCK_CATALOG_NODE ?? c.cluster.catalogNode },
    warnings: [...c.warnings, ...rockOnlyWarnings(env)],
  };
}

/**
 * Rock's container variables this server accepts without doing what Rock does with them, each with what
 * it does instead (a compose file written for Rock must start it unchanged, and say so).
 */
function rockOnlyWarnings(env: Env): string[] {
  const warnings: string[] = [];
  const consul = ["ROCK_CONSUL_SERVER", "ROCK_CONSUL_TOKEN", "ROCK_CONSUL_INTERVAL"].filter((name) => env[name] !== undefined);
  if (consul.length > 0) {
    warnings.push(
      `${consul.join(", ")}: Consul registration (Rock 1.x) is not done by this server; it registers with Opal (ROCK_OPAL_SERVER) and a load balancer finds it by health checks on /_check (README, Several nodes)`,
    );
  }
  const home = env.ROCK_HOME;
  if (home !== undefined) {
    warnings.push(
      env.ROCK_DATA_DIR !== undefined
        ? `ROCK_HOME (${home}) is not used: every file of this server is in its data folder, ROCK_DATA_DIR (${env.ROCK_DATA_DIR})`
        : `ROCK_HOME: this server keeps every file (catalogue, session folders, R console log, generated secrets) in its data folder, here ROCK_HOME (${home}); Rock's conf/ and logs/ layout is not used`,
    );
  }
  return warnings;
}

/**
 * The first of two ways of setting one thing that is set (`--config` over ROCK_CONFIG, ROCK_NODE_ID
 * over Rock's ROCK_ID). Both are read whatever their values, as arguments, so that neither is
 * reported unknown.
 */
function preferred(first: string | undefined, second: string | undefined): string | undefined {
  return first ?? second;
}

/** A path relative to the working folder made absolute, as dataDir is; empty stays empty (unset). */
function resolvedOrEmpty(file: string): string {
  return file === "" ? "" : path.resolve(file);
}

const ISOLATION_MODES: readonly IsolationMode[] = ["auto", "required"];
const QUOTA_MODES: readonly QuotaMode[] = ["auto", "required", "off"];
const LOG_LEVELS: readonly LogLevel[] = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
const LOG_FORMATS: readonly LogFormat[] = ["json", "pretty"];

/** Checks what types alone do not: enumerations and ranges. */
function validate(c: Config): Config {
  if (!ISOLATION_MODES.includes(c.r.isolation)) {
    throw new Error(`r.isolation: expected one of ${ISOLATION_MODES.join(", ")}, not '${c.r.isolation}'`);
  }
  if (!(["host", "none"] as const).includes(c.r.sessionNetwork)) throw new Error(`r.sessionNetwork: expected host or none, not '${c.r.sessionNetwork}'`);
  if (!(["minimal", "host"] as const).includes(c.r.sessionFilesystem)) throw new Error(`r.sessionFilesystem: expected minimal or host, not '${c.r.sessionFilesystem}'`);
  if (!(["private", "shared"] as const).includes(c.r.sessionTmp)) throw new Error(`r.sessionTmp: expected private or shared, not '${c.r.sessionTmp}'`);
  if (!QUOTA_MODES.includes(c.r.quotas)) throw new Error(`r.quotas: expected one of ${QUOTA_MODES.join(", ")}, not '${c.r.quotas}'`);
  if (!LOG_LEVELS.includes(c.log.level)) throw new Error(`log.level: expected one of ${LOG_LEVELS.join(", ")}, not '${c.log.level}'`);
  if (!LOG_FORMATS.includes(c.log.format)) throw new Error(`log.format: expected one of ${LOG_FORMATS.join(", ")}, not '${c.log.format}'`);
  if (!Number.isInteger(c.port) || c.port < 0 || c.port > 65535) throw new Error(`port: expected an integer from 0 to 65535, not ${c.port}`);
  // A typo of a few zeros would otherwise fork that many R processes where nothing else bounds them.
  if (!Number.isInteger(c.r.spareSessions) || c.r.spareSessions < 0 || c.r.spareSessions > MAX_SPARE_SESSIONS) {
    throw new Error(`r.spareSessions: expected an integer from 0 to ${MAX_SPARE_SESSIONS}, not ${c.r.spareSessions}`);
  }
  parseUidRange(c.r.sessionUids);
  // The R server reads the path as one line (worker.R).
  if (/[\r\n]/.test(c.r.profile)) throw new Error("r.profile: a file path on one line is expected");
  for (const key of TIMEOUTS) if (!(c.limits[key] > 0)) throw new Error(`limits.${key}: expected a number of seconds > 0`);
  for (const key of ["retrySeconds", "refreshSeconds"] as const) if (!(c.opal[key] > 0)) throw new Error(`opal.${key}: expected a number of seconds > 0`);
  if (c.opal.server !== "" && !/^https?:\/\/[^/]/.test(c.opal.server)) throw new Error(`opal.server: expected an http(s):// URL, not '${c.opal.server}'`);
  for (const network of c.auth.openNetworks) parseNetwork(network, "auth.openNetworks");
  for (const network of c.server.trustedProxies) parseNetwork(network, "server.trustedProxies");
  new PeerTable(c.node.id, parsePeers(c.cluster.peers), c.cluster.catalogNode);
  return c;
}

const MAX_SPARE_SESSIONS = 100;

/** Connection bounds: none may be turned off, a connection must always end. */
const TIMEOUTS = ["idleTimeoutSeconds", "headersTimeoutSeconds", "requestTimeoutSeconds", "bodyIdleTimeoutSeconds"] as const;

/** `first-last`, both unprivileged uids (> 0, < 2^32 - 1), first <= last. */
export function parseUidRange(text: string): { readonly first: number; readonly last: number } {
  const match = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(text);
  const first = Number(match?.[1]);
  const last = Number(match?.[2]);
  if (!match || first < 1 || last < first || last >= 2 ** 32 - 1) {
    throw new Error(`r.sessionUids: expected 'first-last' with 0 < first <= last, not '${text}'`);
  }
  return { first, last };
}
