import os from "node:os";
import path from "node:path";
import { parseNetwork } from "./networks.js";
import type { Config } from "./config.js";
import { absolutePath, boolean, bytes, httpUrl, integer, list, number, oneOf, optionalPath, optionalText, seconds, text } from "./kinds.js";
import { ROLE_PAIRS_SHOWN } from "./rock.js";
import { Setting, valuesOf, type Source, type Table } from "./setting.js";
import { R_SETTINGS } from "./r-settings.js";
import { users } from "./users.js";

/** The variable naming the file, when `--config` is not given. */
export const CONFIG_VARIABLE = "ROCK_CONFIG";

/** What the file and the environment set: the rest of Config is what loading found. */
type Settable = Omit<Config, "configFile" | "warnings">;

const networks = list("comma-separated CIDRs", (item, where) => parseNetwork(item, where));

/**
 * Every setting once: its key (the path in the file), its variables, its type, its default and its line
 * in docs/configuration.md's table (test/tools/gen-config-doc.ts writes it there; its links are relative
 * to docs/).
 */
export const SETTINGS = {
  port: new Setting(integer(0, 65535), { env: "ROCK_PORT", default: 8085, meaning: "every protocol on this one port" }),
  host: new Setting(text, { env: "ROCK_HOST", default: "0.0.0.0", meaning: "bind address" }),
  tls: {
    cert: new Setting(optionalPath, {
      env: "ROCK_TLS_CERT",
      default: "",
      meaning:
        "PEM file of the certificate chain; with `tls.key` the port speaks HTTPS only (see [HTTPS](protocols.md#https)); one without the other stops the start",
    }),
    key: new Setting(optionalPath, { env: "ROCK_TLS_KEY", default: "", meaning: "PEM file of the certificate's private key, unencrypted" }),
  },
  dataDir: new Setting(absolutePath, {
    env: "ROCK_DATA_DIR",
    rock: "ROCK_HOME",
    computed: () => path.resolve("data"),
    shown: "`./data`",
    meaning: "LevelDB, sessions' folders, console log, generated users",
  }),
  node: {
    id: new Setting(text, {
      env: "ROCK_NODE_ID",
      rock: "ROCK_ID",
      computed: () => `rock-${os.hostname()}`,
      shown: "`rock-<hostname>`",
      meaning: "`id` of `/_info` and `/rserver`",
    }),
    name: new Setting(optionalText, { env: "ROCK_NODE_NAME", default: undefined, shown: "the id", meaning: "`name` of `/_info`" }),
    cluster: new Setting(text, { rock: "ROCK_CLUSTER", default: "default", meaning: "`cluster` of `/_info` and `/rserver`" }),
    tags: new Setting(list("comma-separated"), { rock: "ROCK_TAGS", default: [], meaning: "`tags` of `/_info` and `/rserver`" }),
    publicUrl: new Setting(optionalText, {
      env: "ROCK_PUBLIC_URL",
      rock: "ROCK_SERVER",
      default: undefined,
      meaning: "`server` of `/_info`",
    }),
  },
  users: new Setting(users, {
    env: "ROCK_USERS",
    alsoSetBy: ROLE_PAIRS_SHOWN,
    default: [],
    shown: "none: the first start creates `administrator`",
    meaning: "`[{name, secret, roles}]`; secrets below",
  }),
  r: R_SETTINGS,
  packages: {
    repos: new Setting(list("comma-separated"), {
      rock: "ROCK_REPOS",
      default: [],
      shown: 'R\'s `getOption("repos")`, else `https://cloud.r-project.org`',
      meaning: "archive installs and updates, and the start's own installs ([Quick start](../README.md#quick-start))",
    }),
    gitHost: new Setting(text, {
      env: "ROCK_GIT_HOST",
      default: "https://github.com",
      meaning: "base URL of the git host (GitHub-compatible) for the `git` manager",
    }),
    gitOrganization: new Setting(text, { env: "ROCK_GIT_ORG", default: "datashield", meaning: "for git names without `org/`" }),
    library: new Setting(text, {
      env: "ROCK_R_LIBRARY",
      default: "",
      shown: "empty: R's first library",
      meaning: "the library package operations install into and R sessions search first",
    }),
    sessionInstalls: new Setting(oneOf("auto", "private", "none"), {
      env: "ROCK_PACKAGES_SESSION_INSTALLS",
      default: "auto",
      meaning:
        "where `install.packages()`, `remotes::install_*()` and `R CMD INSTALL` write from an R session: `auto`, a session of an administrator or a manager into `packages.library`, loaded by every later session (Rock's way), any other session into a library of its own, first in its `.libPaths()` and removed with it; `private`, every session into its own; `none`: refused with an R error ([Packages from a session](r-service.md#packages-from-a-session))",
    }),
    timeoutSeconds: new Setting(number, {
      env: "ROCK_PACKAGES_TIMEOUT_SECONDS",
      default: 3600,
      meaning: "a package operation is stopped past it; <= 0: never",
    }),
  },
  limits: {
    maxBodyBytes: new Setting(bytes, { env: "ROCK_MAX_BODY_BYTES", default: 64 * 1024 * 1024, meaning: "413 past it" }),
    maxUploadBytes: new Setting(bytes, { env: "ROCK_MAX_UPLOAD_BYTES", default: 16 * 1024 * 1024 * 1024, meaning: "413 past it" }),
    maxAssignBytes: new Setting(bytes, {
      env: "ROCK_MAX_ASSIGN_BYTES",
      default: 16 * 1024 * 1024 * 1024,
      meaning:
        "an assign's serialization (`_assign`, `Assign`, `AssignStream`) as sent; a script stays bounded by `limits.maxBodyBytes`; 413 past it",
    }),
    headersTimeoutSeconds: new Setting(seconds, {
      env: "ROCK_HEADERS_TIMEOUT_SECONDS",
      default: 20,
      meaning: "a request's headers, an HTTP/2 SETTINGS exchange, a TLS handshake",
    }),
    requestTimeoutSeconds: new Setting(seconds, {
      env: "ROCK_REQUEST_TIMEOUT_SECONDS",
      default: 300,
      meaning: "a whole request body, uploads and client streams excepted",
    }),
    bodyIdleTimeoutSeconds: new Setting(seconds, {
      env: "ROCK_BODY_IDLE_TIMEOUT_SECONDS",
      default: 60,
      meaning: "a request body (uploads included) sending nothing for this long",
    }),
    idleTimeoutSeconds: new Setting(seconds, {
      env: "ROCK_IDLE_TIMEOUT_SECONDS",
      default: 65,
      meaning: "idle HTTP/1.1 and HTTP/2 connections (the four `limits.*Seconds` must be > 0: a connection must always end)",
    }),
  },
  auth: {
    maxFailures: new Setting(number, {
      env: "ROCK_AUTH_MAX_FAILURES",
      default: 10,
      meaning: "failed logins per client address and window, then 429; <= 0: no limit",
    }),
    failureWindowSeconds: new Setting(number, {
      env: "ROCK_AUTH_FAILURE_WINDOW_SECONDS",
      default: 60,
      meaning: "opened by a client's first failure",
    }),
    trackedClients: new Setting(number, {
      env: "ROCK_AUTH_TRACKED_CLIENTS",
      default: 10_000,
      meaning: "client addresses remembered; the oldest is forgotten past it",
    }),
    hashWorkers: new Setting(number, {
      env: "ROCK_AUTH_HASH_WORKERS",
      default: 0,
      shown: "0: cores − 1",
      meaning: "password-check threads",
    }),
    hashQueue: new Setting(number, { env: "ROCK_AUTH_HASH_QUEUE", default: 32, meaning: "checks waiting; 429 past it" }),
    securityEnabled: new Setting(boolean, {
      rock: "ROCK_SECURITY_ENABLED",
      default: true,
      meaning:
        "false: clients in `auth.openNetworks` are served without credentials ([Security model](security.md#security-model)); alone it changes nothing but a warning",
    }),
    openNetworks: new Setting(networks, {
      env: "ROCK_SECURITY_OPEN_NETWORKS",
      default: [],
      meaning: "the only clients `auth.securityEnabled: false` opens the service to",
    }),
  },
  opal: {
    server: new Setting(httpUrl, {
      rock: "ROCK_OPAL_SERVER",
      default: "",
      meaning:
        "Opal's base URL: set (with `node.publicUrl`), the node registers itself there ([Several nodes](operations.md#several-nodes))",
    }),
    token: new Setting(text, { rock: "ROCK_OPAL_TOKEN", default: "", meaning: "Opal's app token, sent as `X-App-Auth`; never logged" }),
    retrySeconds: new Setting(seconds, {
      env: "ROCK_OPAL_RETRY_SECONDS",
      default: 10,
      meaning: "after a failed registration, the wait before the next attempt",
    }),
    refreshSeconds: new Setting(seconds, {
      env: "ROCK_OPAL_REFRESH_SECONDS",
      default: 60,
      meaning: "after a registration, the wait before registering again (Opal drops a node whose call-back failed)",
    }),
  },
  server: {
    drainSeconds: new Setting(number, {
      env: "ROCK_DRAIN_SECONDS",
      default: 30,
      meaning: "on SIGTERM/SIGINT, time for running calls to finish; <= 0: none",
    }),
    unaryFastPath: new Setting(boolean, {
      env: "ROCK_UNARY_FAST_PATH",
      default: true,
      meaning:
        "unary gRPC, gRPC-Web and Connect calls on this server's unary fast path ([gRPC, gRPC-Web and Connect](protocols.md#grpc-grpc-web-and-connect)); false: every RPC through Connect-ES",
    }),
    warmUpCalls: new Setting(integer(0, 100_000), {
      env: "ROCK_WARM_UP_CALLS",
      default: 1000,
      meaning:
        "evaluations the service makes in a session of its own at start, before `/_check` says ready, so that the first clients' calls are as fast as later ones ([Stopping and starting](operations.md#stopping-and-starting)); 0: none",
    }),
    trustedProxies: new Setting(networks, {
      env: "ROCK_TRUSTED_PROXIES",
      default: [],
      meaning:
        "proxies whose `X-Forwarded-For` names the client (failed logins, open networks); [Several nodes](operations.md#several-nodes)",
    }),
  },
  cluster: {
    peers: new Setting(list("`id=url,…`"), {
      env: "ROCK_PEERS",
      default: [],
      meaning:
        "the cluster's nodes; calls for another node's session or the catalogue are passed on to it ([Several nodes](operations.md#several-nodes))",
    }),
    catalogNode: new Setting(text, {
      env: "ROCK_CATALOG_NODE",
      default: "",
      shown: "empty: this node",
      meaning: "the node that serves the catalogue; the others open no LevelDB",
    }),
  },
  log: {
    level: new Setting(oneOf("fatal", "error", "warn", "info", "debug", "trace", "silent"), {
      env: "ROCK_LOG_LEVEL",
      default: "info",
      meaning: "service log: `fatal`, `error`, `warn`, `info` (access lines, lifecycle), `debug`, `trace`, `silent`",
    }),
    format: new Setting(oneOf("json", "pretty"), {
      env: "ROCK_LOG_FORMAT",
      default: "json",
      meaning: "`json` (one object per line) or `pretty` (needs the dev dependency `pino-pretty`)",
    }),
    flushMs: new Setting(integer(0, 10_000), {
      env: "ROCK_LOG_FLUSH_MS",
      default: 100,
      meaning:
        "info lines (access lines) wait up to this long, or for 8 KiB of them, to be written together; warnings and errors are written at once; 0: every line at once",
    }),
  },
  metrics: {
    enabled: new Setting(boolean, {
      env: "ROCK_METRICS_ENABLED",
      default: true,
      meaning: "false: no metric is kept and `GET /metrics` answers 404",
    }),
  },
} satisfies Table<Settable>;

/** Every setting's value: a variable over the file over the default. */
export function settingValues(source: Source): Settable {
  // SETTINGS is a Table<Settable> (checked above): each key of Settable has a setting of exactly its
  // type, so the object built key by key is a Settable; TypeScript cannot follow a walk over keys.
  return valuesOf(SETTINGS, source) as Settable;
}
