import { pathToFileURL } from "node:url";
import { execa } from "execa";
import { Fault } from "../../errors/fault.js";
import type { Owner } from "../confine/as-owner.js";
import { packageEnvironment } from "../confine/environment.js";
import { publishPackages } from "./publish.js";
import { runPackageScript, type RunOptions } from "./runner.js";
import {
  parseGitName,
  parsePackageNames,
  parseSource,
  validateGitRef,
  validatePackageName,
  type GitRepository,
  type PackageSource,
} from "./validation.js";

export interface PackageManagerOptions {
  /** R executable (`R`, found on PATH, or a path). */
  readonly rExecutable: string;
  /** Library to install into and remove from; listed first when reading. Default: R's first `.libPaths()`. */
  readonly library?: string;
  /** r.setupLibrary: searched after R's own libraries (jsonlite may be there). */
  readonly setupLibrary?: string;
  /** Repositories for the archive source and for updates; empty means R's `getOption("repos")`. */
  readonly repos: readonly string[];
  /**
   * Where the `git` source fetches from:
   * - an `http(s)://` URL is a GitHub-compatible host, used through `remotes::install_github`:
   *   `https://github.com` (or empty) means `api.github.com`; a host already naming its API
   *   (`api.…` or a path with `/api/`) is used as is; any other host gets GitHub Enterprise's `/api/v3`;
   * - anything else (`file://…`, an absolute path, `ssh://…`, `git://…`) is a plain git server, used through
   *   `remotes::install_git("<gitHost>/<org>/<repo>", ref=)` — install_github only speaks the GitHub API.
   */
  readonly gitHost: string;
  /** Organisation of a git package given by bare name. */
  readonly gitOrganization: string;
  /** Appends complete lines (each ending with a newline) to the server's console log. */
  readonly log: (text: string) => void;
  /** Where each operation gets its temporary folder (deleted when the operation ends). */
  readonly scratchDir: string;
  /** Extra environment for R (e.g. R_USER_CACHE_DIR, GITHUB_PAT). */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Longest an operation may run before its R and everything R started are stopped (a download or a
   * git fetch that hangs would otherwise hold every later install); 0 or absent: no limit.
   */
  readonly timeoutSeconds?: number;
}

export interface PackageMatrixJson {
  readonly rowNames: string[];
  readonly columnNames: string[];
  /** One row per package, in the order of `columnNames`; NA is null. */
  readonly rows: (string | null)[][];
}

/** `name` plus one string per DESCRIPTION field. */
export type PackageDescriptionJson = Record<string, string>;

/** Per package: AggregateMethods, AssignMethods, Options and the DATASHIELD file's fields. */
export type PackageSettingsJson = Record<string, Record<string, string[]>>;

export interface InstallRequest {
  readonly name: string;
  /** archive (default, alias cran), git (g), collection (coll). */
  readonly manager?: string;
  /** Git reference; default master. Only git installs read it. */
  readonly ref?: string;
}

export interface InstalledPackage {
  readonly name: string;
  readonly version: string;
}

export interface UpdatedPackages {
  /** Installed in the repositories' newer version. */
  readonly updated: string[];
  /** A newer version is in the repositories, but it could not be installed (R's output says why). */
  readonly failed: string[];
}

export interface RemovedPackages {
  readonly removed: string[];
  /** Not in the managed library: nothing to do for them. */
  readonly missing: string[];
}

type GitTarget = { readonly mode: "git"; readonly url: string } | { readonly mode: "github"; readonly api: string };

/**
 * Installs, updates, lists and removes R packages. Every operation runs in its own short-lived R
 * process, never in a user's session, so sessions are never blocked; R's output goes live to the
 * console log and to the caller's optional line callback. Operations that change the library are
 * serialized (two R installs into one library trip over each other's locks); reads run freely.
 */
export class PackageManager {
  private mutations: Promise<unknown> = Promise.resolve();
  /** R's first library, read once, when packages.library is not set. */
  private defaultLibrary: Promise<string> | undefined;

  constructor(private readonly options: PackageManagerOptions) {}

  async list(run: RunOptions = {}): Promise<PackageMatrixJson> {
    return parseJson<PackageMatrixJson>(await this.run("list installed packages", { ROCK_PKG_OP: "list", ROCK_PKG_FORMAT: "json" }, run));
  }

  /** `serialize()` of the installed.packages() matrix. */
  async listSerialized(run: RunOptions = {}): Promise<Uint8Array> {
    return this.run("list installed packages", { ROCK_PKG_OP: "list", ROCK_PKG_FORMAT: "rds" }, run);
  }

  /** NotFound when the package is not installed. */
  async describe(name: string, run: RunOptions = {}): Promise<PackageDescriptionJson> {
    validatePackageName(name);
    return parseJson<PackageDescriptionJson>(
      await this.run(`describe ${name}`, { ROCK_PKG_OP: "describe", ROCK_PKG_NAME: name, ROCK_PKG_FORMAT: "json" }, run),
    );
  }

  /** `serialize()` of the same named list of strings as {@link describe}. */
  async describeSerialized(name: string, run: RunOptions = {}): Promise<Uint8Array> {
    validatePackageName(name);
    return this.run(`describe ${name}`, { ROCK_PKG_OP: "describe", ROCK_PKG_NAME: name, ROCK_PKG_FORMAT: "rds" }, run);
  }

  /** `{}` when no installed package declares any setting. */
  async settings(run: RunOptions = {}): Promise<PackageSettingsJson> {
    return parseJson<PackageSettingsJson>(
      await this.run("read analysis package settings", { ROCK_PKG_OP: "settings", ROCK_PKG_FORMAT: "json" }, run),
    );
  }

  /** `serialize()` of a named list (by package) of named lists of character vectors. */
  async settingsSerialized(run: RunOptions = {}): Promise<Uint8Array> {
    return this.run("read analysis package settings", { ROCK_PKG_OP: "settings", ROCK_PKG_FORMAT: "rds" }, run);
  }

  /** Installs and checks the package is then in the library; rejects with R's message otherwise. */
  async install(request: InstallRequest, run: RunOptions = {}): Promise<InstalledPackage> {
    const env = this.installEnv(request);
    return this.mutate(async () => parseJson<InstalledPackage>(await this.run(`install ${describeInstall(env)}`, env, run)));
  }

  /**
   * Updates every package that the repositories hold in a newer version, into the managed library.
   * One that fails leaves the others updated and is named in the answer, and in the console log.
   */
  async update(run: RunOptions = {}): Promise<UpdatedPackages> {
    return this.mutate(async () => parseJson<UpdatedPackages>(await this.run("update all packages", { ROCK_PKG_OP: "update" }, run)));
  }

  /** Names may be repeated and/or comma separated. Names not installed in the managed library are skipped. */
  async remove(names: readonly string[], run: RunOptions = {}): Promise<RemovedPackages> {
    const valid = parsePackageNames(names);
    return this.mutate(async () =>
      parseJson<RemovedPackages>(
        await this.run(`remove ${valid.join(", ")}`, { ROCK_PKG_OP: "remove", ROCK_PKG_NAMES: valid.join("\n") }, run),
      ),
    );
  }

  /**
   * Copies packages a session installed into its own library (read as the session's `owner`) into the
   * managed library, where every later session loads them: one change of the library among the
   * others, so it never meets an install or a removal of the API half done. Answers the packages
   * copied.
   */
  async share(from: string, names: readonly string[], owner: Owner | undefined, who: string): Promise<string[]> {
    return this.mutate(async () => {
      const into = await this.libraryPath();
      const log = (text: string): void => this.options.log(text);
      const shared = await publishPackages({ from, into, names, log, ...(owner ? { owner } : {}) });
      if (shared.length > 0) log(`[packages] ${who} installed ${shared.join(", ")} into ${into} for every session\n`);
      return shared;
    });
  }

  /** The managed library: packages.library, else R's first library, as the package operations find it. */
  private libraryPath(): Promise<string> {
    const { library, rExecutable } = this.options;
    if (library) return Promise.resolve(library);
    this.defaultLibrary ??= execa(rExecutable, ["--no-echo", "--no-save", "--no-restore", "-e", "cat(.libPaths()[1])"], {
      extendEnv: false,
      env: packageEnvironment(process.env),
    })
      .then(({ stdout }) => stdout.trim())
      .catch((error: unknown) => {
        this.defaultLibrary = undefined;
        throw error;
      });
    return this.defaultLibrary;
  }

  /** Validates everything and turns it into the script's environment; throws before any R starts. */
  private installEnv(request: InstallRequest): Record<string, string> {
    const source: PackageSource = parseSource(request.manager ?? "");
    if (source !== "git") {
      validatePackageName(request.name);
      // `ref` "applies only to the git repository type" (r-execution-service §4): ignored, it never reaches R.
      return { ROCK_PKG_OP: "install", ROCK_PKG_SOURCE: source, ROCK_PKG_NAME: request.name, ROCK_PKG_PACKAGE: request.name };
    }
    const repository = parseGitName(request.name, this.options.gitOrganization);
    const ref = validateGitRef(request.ref ?? "");
    const target = gitTarget(this.options.gitHost, repository);
    return {
      ROCK_PKG_OP: "install",
      ROCK_PKG_SOURCE: "git",
      ROCK_PKG_NAME: `${repository.organization}/${repository.repository}`,
      ROCK_PKG_PACKAGE: repository.repository,
      ROCK_PKG_REF: ref,
      ROCK_PKG_GIT_MODE: target.mode,
      ...(target.mode === "git" ? { ROCK_PKG_GIT_URL: target.url } : { ROCK_PKG_GIT_API: target.api }),
    };
  }

  private mutate<T>(operation: () => Promise<T>): Promise<T> {
    const next = this.mutations.then(operation, operation);
    this.mutations = next.catch(() => undefined);
    return next;
  }

  private run(title: string, env: Record<string, string>, run: RunOptions): Promise<Buffer> {
    const { options } = this;
    return runPackageScript({
      rExecutable: options.rExecutable,
      scratchDir: options.scratchDir,
      log: options.log,
      title,
      env: {
        ...options.env,
        ...env,
        ROCK_PKG_LIB: options.library ?? "",
        ROCK_PKG_SETUP_LIB: options.setupLibrary ?? "",
        ROCK_PKG_REPOS: options.repos.join("\n"),
      },
      onLine: run.onLine,
      signal: run.signal,
      timeoutMs: (options.timeoutSeconds ?? 0) * 1000,
    });
  }
}

function describeInstall(env: Record<string, string>): string {
  const source = env.ROCK_PKG_SOURCE;
  return source === "git" ? `${env.ROCK_PKG_NAME}@${env.ROCK_PKG_REF} from git` : `${env.ROCK_PKG_NAME} from ${source}`;
}

/** See {@link PackageManagerOptions.gitHost} for the rule. */
export function gitTarget(gitHost: string, repository: GitRepository): GitTarget {
  const host = gitHost.trim().replace(/\/+$/, "");
  const path = `${repository.organization}/${repository.repository}`;
  if (host === "") return { mode: "github", api: "api.github.com" };
  if (host.startsWith("/")) return { mode: "git", url: `${pathToFileURL(host).href}/${path}` };
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(host)?.[1]?.toLowerCase();
  if (scheme !== "http" && scheme !== "https") {
    if (scheme === undefined) {
      throw new Fault("precondition", `The git host is not a URL or an absolute path: '${gitHost}'`);
    }
    return { mode: "git", url: `${host}/${path}` };
  }
  const url = new URL(host);
  const base = `${url.host}${url.pathname.replace(/\/+$/, "")}`;
  if (base === "github.com" || base === "www.github.com") return { mode: "github", api: "api.github.com" };
  if (url.host.startsWith("api.") || url.pathname.includes("/api/")) return { mode: "github", api: base };
  return { mode: "github", api: `${base}/api/v3` };
}

function parseJson<T>(bytes: Buffer): T {
  return JSON.parse(bytes.toString("utf8")) as T;
}
