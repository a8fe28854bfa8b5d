import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parse as parseYaml } from "yaml";
import type { Config, IsolationMode, UserConfig } from "./config.js";

/** Every setting has a default: the server runs with no file and no environment. */
export function defaults(): Config {
  return {
    port: 8085,
    host: "0.0.0.0",
    dataDir: path.resolve("data"),
    node: { id: `rock-${os.hostname()}`, cluster: "default", tags: [], publicUrl: undefined },
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
      sessionMemoryMb: 4096,
      sessionProcesses: 64,
      maxSessions: 100,
      maxSessionsPerUser: 10,
      maxEvalCpuSeconds: 0,
      interruptGraceSeconds: 5,
    },
    packages: { repos: ["https://cloud.r-project.org"], gitHost: "https://github.com", gitOrganization: "datashield", library: "", timeoutSeconds: 3600 },
    limits: {
      maxBodyBytes: 64 * 1024 * 1024,
      maxUploadBytes: 16 * 1024 * 1024 * 1024,
      idleTimeoutSeconds: 65,
      headersTimeoutSeconds: 20,
      requestTimeoutSeconds: 300,
      bodyIdleTimeoutSeconds: 60,
    },
    auth: { maxFailures: 10, failureWindowSeconds: 60, trackedClients: 10_000, hashWorkers: 0, hashQueue: 32 },
  };
}

type Env = Readonly<Record<string, string | undefined>>;

/** Defaults, then the YAML file (`--config FILE` or ROCK_CONFIG), then ROCK_* environment variables. */
export function loadConfig(argv: readonly string[] = process.argv.slice(2), env: Env = process.env): Config {
  let config = defaults();
  const file = flagValue(argv, "--config") ?? env.ROCK_CONFIG;
  if (file) config = { ...merge(config, readYaml(file), file), configFile: path.resolve(file) };
  return validate(applyEnv(config, env));
}

function flagValue(argv: readonly string[], flag: string): string | undefined {
  const i = argv.findIndex((a) => a === flag || a.startsWith(flag + "="));
  if (i < 0) return undefined;
  const a = argv[i]!;
  return a.includes("=") ? a.slice(a.indexOf("=") + 1) : argv[i + 1];
}

function readYaml(file: string): Record<string, unknown> {
  const doc: unknown = parseYaml(fs.readFileSync(file, "utf8"));
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
    const n = Number(over);
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
    return { name: o.name, secret: o.secret, roles };
  });
}

/**
 * ROCK_USERS: `name:secret:role,role;name:secret:role` (a secret may hold ':'; `{bcrypt}` hashes hold
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
      return { name: entry.slice(0, first).trim(), secret: entry.slice(first + 1, last), roles: entry.slice(last + 1).split(",").map((r) => r.trim()).filter(Boolean) };
    });
}

function applyEnv(c: Config, env: Env): Config {
  const num = (name: string, fallback: number) => {
    const v = env[name];
    if (v === undefined || v === "") return fallback;
    const n = Number(v);
    if (!Number.isFinite(n)) throw new Error(`${name}: expected a number`);
    return n;
  };
  const bool = (name: string, fallback: boolean) => (env[name] === undefined ? fallback : /^(true|1|yes)$/i.test(env[name]!));
  const list = (name: string, fallback: readonly string[]) =>
    env[name] === undefined ? fallback : env[name]!.split(",").map((s) => s.trim()).filter(Boolean);
  return {
    ...c,
    port: num("ROCK_PORT", c.port),
    host: env.ROCK_HOST ?? c.host,
    dataDir: path.resolve(env.ROCK_DATA_DIR ?? c.dataDir),
    node: {
      ...c.node,
      id: env.ROCK_NODE_ID ?? c.node.id,
      cluster: env.ROCK_CLUSTER ?? c.node.cluster,
      tags: list("ROCK_TAGS", c.node.tags),
      ...(env.ROCK_PUBLIC_URL ? { publicUrl: env.ROCK_PUBLIC_URL } : {}),
    },
    users: env.ROCK_USERS !== undefined ? envUsers(env.ROCK_USERS) : c.users,
    r: {
      ...c.r,
      executable: env.ROCK_R_EXECUTABLE ?? c.r.executable,
      startOnBoot: bool("ROCK_R_START", c.r.startOnBoot),
      sessionTimeoutMinutes: num("ROCK_SESSION_TIMEOUT", c.r.sessionTimeoutMinutes),
      maxEvalSeconds: num("ROCK_MAX_EVAL_SECONDS", c.r.maxEvalSeconds),
      isolation: (env.ROCK_R_ISOLATION ?? c.r.isolation) as IsolationMode,
      sessionUids: env.ROCK_R_SESSION_UIDS ?? c.r.sessionUids,
      sessionsDir: env.ROCK_R_SESSIONS_DIR ?? c.r.sessionsDir,
      sessionMemoryMb: num("ROCK_R_SESSION_MEMORY_MB", c.r.sessionMemoryMb),
      sessionProcesses: num("ROCK_R_SESSION_PROCESSES", c.r.sessionProcesses),
      maxSessions: num("ROCK_R_MAX_SESSIONS", c.r.maxSessions),
      maxSessionsPerUser: num("ROCK_R_MAX_SESSIONS_PER_USER", c.r.maxSessionsPerUser),
      maxEvalCpuSeconds: num("ROCK_MAX_EVAL_CPU_SECONDS", c.r.maxEvalCpuSeconds),
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
    },
  };
}

const ISOLATION_MODES: readonly IsolationMode[] = ["auto", "required"];

/** Checks what types alone do not: enumerations and ranges. */
function validate(c: Config): Config {
  if (!ISOLATION_MODES.includes(c.r.isolation)) {
    throw new Error(`r.isolation: expected one of ${ISOLATION_MODES.join(", ")}, not '${c.r.isolation}'`);
  }
  parseUidRange(c.r.sessionUids);
  for (const key of TIMEOUTS) if (!(c.limits[key] > 0)) throw new Error(`limits.${key}: expected a number of seconds > 0`);
  return c;
}

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
