/** The whole configuration, after defaults, the YAML file and environment overrides were applied. */
export interface Config {
  /** Listening port for every protocol (gRPC, gRPC-Web, Connect, REST). */
  readonly port: number;
  readonly host: string;
  /** Where LevelDB, sessions' folders, the console log and generated secrets live. */
  readonly dataDir: string;
  readonly node: NodeConfig;
  /** Users from the configuration; empty means "create an administrator on first start". */
  readonly users: readonly UserConfig[];
  readonly r: RConfig;
  readonly packages: PackagesConfig;
  readonly limits: LimitsConfig;
}

export interface NodeConfig {
  readonly id: string;
  readonly cluster: string;
  readonly tags: readonly string[];
  /** Public base URL announced by /_info (`server`), when set. */
  readonly publicUrl?: string;
}

export interface UserConfig {
  readonly name: string;
  /** Plain text, `{noop}plain`, or `{bcrypt}$2…` */
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
  /** Interrupt an evaluation running longer than this; <= 0 disables. */
  readonly maxEvalSeconds: number;
  /** Upper bound of `wait=true` on commands and results. */
  readonly commandWaitSeconds: number;
  /** Console log file is rotated past this size. */
  readonly logMaxBytes: number;
  /** How many rotated console log files are kept. */
  readonly logFiles: number;
  readonly encoding: string;
}

export interface PackagesConfig {
  /** Repositories for install.packages / update.packages. */
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
  /** Longest a package operation may run before it is stopped; 0: no limit. */
  readonly timeoutSeconds: number;
}

export interface LimitsConfig {
  /** Largest request body accepted by REST and RPC calls (413 past it); uploads excepted. */
  readonly maxBodyBytes: number;
  /** Largest uploaded file. */
  readonly maxUploadBytes: number;
}
