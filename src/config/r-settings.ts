import os from "node:os";
import { fromRoot } from "../package-root.js";
import type { Config } from "./config.js";
import { absolutePath, boolean, bytes, checked, integer, number, oneOf, optionalPath, text, uidRange, list } from "./kinds.js";
import { parseDestination } from "./networks.js";
import { Setting, type Table } from "./setting.js";

const destinations = list("comma-separated IPv4 CIDRs, each with an optional `:port`", (item, where) => parseDestination(item, where));

/** The R server reads the path as one line (worker.R). */
const profile = checked(optionalPath, (file, where) => {
  if (/[\r\n]/.test(file)) throw new Error(`${where}: a file path on one line is expected`);
});

/** The R engine's settings (`r.*`), in the order of docs/configuration.md's table (see SETTINGS). */
export const R_SETTINGS = {
  executable: new Setting(text, { env: "ROCK_R_EXECUTABLE", default: "R", shown: "`R` (on `PATH`)", meaning: "the R executable" }),
  startOnBoot: new Setting(boolean, { env: "ROCK_R_START", default: true, meaning: "start the R server with the service" }),
  autoRestart: new Setting(boolean, { env: "ROCK_R_AUTO_RESTART", default: true, meaning: "restart it when it dies on its own" }),
  startWaitSeconds: new Setting(number, {
    env: "ROCK_R_START_WAIT_SECONDS",
    default: 30,
    meaning: "a call needing R waits this long while R starts, then 503",
  }),
  profile: new Setting(profile, {
    env: "ROCK_R_PROFILE",
    default: "",
    meaning: "R code the R server runs before forking sessions ([Stopping and starting](operations.md#stopping-and-starting))",
  }),
  encoding: new Setting(text, { env: "ROCK_R_ENCODING", default: "UTF-8", meaning: "`encoding` of `/rserver`" }),
  sessionTimeoutMinutes: new Setting(number, {
    env: "ROCK_SESSION_TIMEOUT",
    default: 240,
    meaning: "idle sessions are closed; <= 0: never",
  }),
  suspendIdleMinutes: new Setting(number, {
    env: "ROCK_R_SUSPEND_IDLE_MINUTES",
    default: 30,
    meaning:
      "a session idle this long is suspended: its state saved to disk by its own process, which then ends; its next call resumes it ([Sessions that outlive their process](operations.md#sessions-that-outlive-their-process)); <= 0: never on idle",
  }),
  checkpointIdleSeconds: new Setting(number, {
    env: "ROCK_R_CHECKPOINT_IDLE_SECONDS",
    default: 60,
    meaning:
      "a session that R changed and that then stayed idle this long has its state saved, its process living on: what a crash of the service can lose; <= 0: never",
  }),
  suspendedMaxMb: new Setting(number, {
    env: "ROCK_R_SUSPENDED_MAX_MB",
    default: 0,
    shown: "0: ¼ of the data folder's file system",
    meaning: "the sessions' saved states together, MiB; past it the suspended session idle longest is ended",
  }),
  sessionCheckSeconds: new Setting(number, {
    env: "ROCK_R_SESSION_CHECK_SECONDS",
    default: 600,
    meaning: "how often idle sessions are looked for; <= 0: never",
  }),
  maxEvalSeconds: new Setting(number, {
    env: "ROCK_MAX_EVAL_SECONDS",
    default: 0,
    meaning: "wall-clock bound of an evaluation; <= 0: none",
  }),
  maxEvalCpuSeconds: new Setting(number, {
    env: "ROCK_MAX_EVAL_CPU_SECONDS",
    default: 0,
    meaning: "CPU bound of an evaluation; <= 0: none",
  }),
  interruptGraceSeconds: new Setting(number, {
    env: "ROCK_R_INTERRUPT_GRACE_SECONDS",
    default: 5,
    meaning: "then a session ignoring an interrupt the service sent is ended; <= 0: at once",
  }),
  commandWaitSeconds: new Setting(number, { env: "ROCK_R_COMMAND_WAIT_SECONDS", default: 300, meaning: "cap of `wait=true`" }),
  logMaxBytes: new Setting(bytes, {
    env: "ROCK_R_LOG_MAX_BYTES",
    default: 10 * 1024 * 1024,
    meaning: "the R console log is rotated past this size",
  }),
  logFiles: new Setting(number, { env: "ROCK_R_LOG_FILES", default: 5, meaning: "rotated console log files kept" }),
  isolation: new Setting(oneOf("auto", "required"), {
    env: "ROCK_R_ISOLATION",
    default: "auto",
    meaning: "`required`: refuse to start unless sessions get uids of their own",
  }),
  sessionUids: new Setting(uidRange, {
    env: "ROCK_R_SESSION_UIDS",
    default: { first: 70000, last: 70999 },
    meaning: "uids (and gids) isolated sessions run as",
  }),
  lockDir: new Setting(absolutePath, {
    env: "ROCK_R_LOCK_DIR",
    default: "/run/rock-ts",
    meaning:
      "as root, where the service locks its `r.sessionUids` while it runs (`uids-<first>-<last>.lock`), so that a second server given the same range refuses to start; the same folder for every server of a host ([Security model](security.md#security-model))",
  }),
  sessionsDir: new Setting(text, {
    env: "ROCK_R_SESSIONS_DIR",
    default: "",
    shown: "empty: `<dataDir>/sessions`",
    meaning: "see [Security model](security.md#security-model)",
  }),
  setupLibrary: new Setting(absolutePath, {
    env: "ROCK_R_SETUP_LIBRARY",
    computed: () => fromRoot("r-library"),
    shown: "`r-library/` in the checkout",
    meaning:
      "where the start and `rock-ts setup` install the R packages the service needs when R's libraries lack them; searched after R's own libraries ([Quick start](../README.md#quick-start))",
  }),
  sessionMemoryMb: new Setting(number, {
    env: "ROCK_R_SESSION_MEMORY_MB",
    default: 4096,
    meaning:
      "each session's memory: with quotas its real memory, swap included, all its processes together; without, RLIMIT_AS of each process",
  }),
  quotas: new Setting(oneOf("auto", "required", "off"), {
    env: "ROCK_R_QUOTAS",
    default: "auto",
    meaning: "a control group per isolated session where the host allows (`required`: refuse to start without; `off`)",
  }),
  sessionTmp: new Setting(oneOf("private", "shared"), {
    env: "ROCK_R_SESSION_TMP",
    default: "private",
    meaning: "each isolated session's own `/tmp`, `/var/tmp`, `/dev/shm` where the service may make mount namespaces; `shared`: the host's",
  }),
  sessionNetwork: new Setting(oneOf("auto", "restricted", "host", "none"), {
    env: "ROCK_R_SESSION_NETWORK",
    default: "auto",
    meaning:
      "`restricted`: each isolated session in a network namespace of its own whose traffic leaves through the service's filter: no address of the host (its loopback, its own addresses, so the service's port), no link-local address (cloud metadata), nothing of `r.sessionNetworkDeny`, names resolved through the host's resolvers, everything else reached; `auto`: `restricted` where it can be enforced, else `host` with a warning; `host`: any connection the host can open; `none`: loopback only ([Session network](security.md#session-network))",
  }),
  sessionNetworkAllow: new Setting(destinations, {
    env: "ROCK_R_SESSION_NETWORK_ALLOW",
    default: [],
    meaning:
      "with `restricted`, destinations sessions reach whatever else says (checked first): a database on one of the host's addresses, the metadata address for a deliberate use",
  }),
  sessionNetworkDeny: new Setting(destinations, {
    env: "ROCK_R_SESSION_NETWORK_DENY",
    default: [],
    meaning: "with `restricted`, destinations sessions are refused besides the host's and link-local addresses",
  }),
  sessionFilesystem: new Setting(oneOf("minimal", "host"), {
    env: "ROCK_R_SESSION_FILESYSTEM",
    default: "minimal",
    meaning:
      "`minimal`: each isolated session sees only what R needs (R and its libraries read-only, its own folder, its private temporary folders, the few /etc files R reads) where the service may make mount namespaces; `host`: the host's whole file system ([Security model](security.md#security-model))",
  }),
  sessionsMemoryMb: new Setting(number, {
    env: "ROCK_R_SESSIONS_MEMORY_MB",
    computed: () => Math.floor((os.totalmem() / 1048576) * 0.75),
    shown: "¾ of the host's memory",
    meaning: "all sessions' memory together, with quotas",
  }),
  sessionCpuCores: new Setting(number, {
    env: "ROCK_R_SESSION_CPU_CORES",
    default: 0,
    shown: "0: no cap",
    meaning: "each session's CPU in cores at most, with quotas",
  }),
  sessionProcesses: new Setting(number, { env: "ROCK_R_SESSION_PROCESSES", default: 64, meaning: "RLIMIT_NPROC of each session's uid" }),
  maxSessions: new Setting(number, { env: "ROCK_R_MAX_SESSIONS", default: 100, meaning: "429 past it" }),
  // Opal opens every R and DataSHIELD session of all its users with one account, Armadillo as
  // `administrator`: a limit per account would refuse their users, so none unless a deployment asks.
  maxSessionsPerUser: new Setting(number, {
    env: "ROCK_R_MAX_SESSIONS_PER_USER",
    default: 0,
    shown: "0: no limit",
    meaning:
      "429 past it, suspended sessions counted, for deployments where people sign in themselves; <= 0: none, as behind Opal or Armadillo, which open the sessions of all their users with one account ([Sessions per account](operations.md#sessions-per-account))",
  }),
  // A typo of a few zeros would otherwise fork that many R processes where nothing else bounds them.
  spareSessions: new Setting(integer(0, 100), {
    env: "ROCK_R_SPARE_SESSIONS",
    default: 8,
    meaning:
      "session processes kept forked ahead, so that creating a session hands one over instead of forking (0: none; at most 100); never more than `r.maxSessions` and the free uids of `r.sessionUids` leave",
  }),
} satisfies Table<Config["r"]>;
