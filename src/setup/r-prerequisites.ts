/**
 * What the service needs from R before it listens: the R packages the R server loads (`jsonlite`, and
 * `unix` when sessions are isolated). Whatever R's own libraries lack is installed into the setup
 * library (`r.setupLibrary`, the checkout's `r-library/` by default), which the R server and the
 * package runner append to `.libPaths()`. A service that listens with an R that can never start is the
 * worst of both, so when a package cannot be provided the start stops, saying in one line what to do.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { canInstallDebianPackages, installDebianPackages } from "./debian-packages.js";
import { runR } from "./r-command.js";
import { SetupError } from "./setup-error.js";

/** Where packages come from when neither the configuration nor R's own options name a repository. */
export const DEFAULT_REPOSITORY = "https://cloud.r-project.org";

export interface PrerequisiteOptions {
  /** `r.executable`. */
  readonly rExecutable: string;
  /** `r.setupLibrary`: where missing packages are installed. */
  readonly library: string;
  /** R packages that must load. */
  readonly packages: readonly string[];
  /** `packages.repos`; empty: R's own `getOption("repos")`, else DEFAULT_REPOSITORY. */
  readonly repos: readonly string[];
  /** May install Debian packages (a C compiler) through apt when they are missing (root only). */
  readonly systemPackages: boolean;
  /** One line per step that takes time (an install). */
  readonly progress: (line: string) => void;
}

export interface Prerequisites {
  /** The repositories package operations use: the configured ones, else R's own, else the default. */
  readonly repos: readonly string[];
  /** What was installed into the setup library (empty when nothing was missing). */
  readonly installed: readonly string[];
}

/** The R packages the R server loads, for a service whose sessions are (or are not) isolated. */
export function serviceRPackages(isolated: boolean): string[] {
  return isolated ? ["jsonlite", "unix"] : ["jsonlite"];
}

/** Debian's compiler for R packages with C code (R CMD INSTALL runs make and R's configured CC). */
const TOOLCHAIN = ["gcc", "libc6-dev", "make"];

/**
 * Makes every package of `options.packages` loadable, installing the missing ones into the setup library
 * from the repositories; throws SetupError when it cannot.
 */
export async function ensureRPackages(options: PrerequisiteOptions): Promise<Prerequisites> {
  const found = await probe(options);
  const repos = options.repos.length > 0 ? [...options.repos] : found.repos.length > 0 ? found.repos : [DEFAULT_REPOSITORY];
  if (found.missing.length === 0) return { repos, installed: [] };

  if (!found.headers) {
    throw new SetupError(
      `the R package${plural(found.missing)} ${names(found.missing)} must be compiled and R's headers (R.h) are missing: install them (Debian: apt-get install r-base-dev), or install ${names(found.missing)} into R's library yourself`,
    );
  }
  if (found.compilerMissing.length > 0) {
    if (!options.systemPackages || !canInstallDebianPackages()) {
      throw new SetupError(
        `the R package${plural(found.missing)} ${names(found.missing)} must be compiled and ${found.compilerMissing.join(", ")} ${found.compilerMissing.length > 1 ? "are" : "is"} missing: install a C compiler (Debian: apt-get install ${TOOLCHAIN.join(" ")}; or run 'npx rock-ts setup' as root, which does)`,
      );
    }
    await installDebianPackages(TOOLCHAIN, `to compile the R package${plural(found.missing)} ${names(found.missing)}`, options.progress);
  }

  mkdirSync(options.library, { recursive: true, mode: 0o755 });
  const installed: string[] = [];
  for (const name of found.missing) {
    options.progress(`installing R package '${name}' into ${options.library} from ${repos.join(", ")}`);
    await install(options, name, repos);
    installed.push(name);
  }
  const after = await probe(options);
  if (after.missing.length > 0) {
    throw new SetupError(
      `the R package${plural(after.missing)} ${names(after.missing)} still cannot be loaded after installing into ${options.library}`,
    );
  }
  return { repos, installed };
}

/** The packages of `packages` that do not load, with the setup library searched last. */
export async function missingRPackages(rExecutable: string, library: string, packages: readonly string[]): Promise<string[]> {
  return (await probe({ rExecutable, library, packages })).missing;
}

interface Probe {
  readonly missing: string[];
  /** `getOption("repos")` without the placeholder R leaves unset (`@CRAN@`). */
  readonly repos: string[];
  readonly headers: boolean;
  /** Commands a compile needs that are not on PATH (R's C compiler, make); asked only when a package is missing. */
  readonly compilerMissing: string[];
}

// Not --vanilla: the site's Rprofile is where a mirror or a package manager is configured.
const PROBE = String.raw`
lib <- Sys.getenv("ROCK_SETUP_LIB")
if (dir.exists(lib)) .libPaths(c(.libPaths(), lib))
say <- function(key, value) cat(key, "\t", paste(value, collapse = "\t"), "\n", sep = "")
missing <- character(0)
for (p in strsplit(Sys.getenv("ROCK_SETUP_PACKAGES"), ",", fixed = TRUE)[[1]]) {
  if (!suppressWarnings(requireNamespace(p, quietly = TRUE))) missing <- c(missing, p)
}
say("missing", missing)
repos <- getOption("repos")
say("repos", repos[nzchar(repos) & repos != "@CRAN@"])
say("headers", file.exists(file.path(R.home("include"), "R.h")))
if (length(missing) > 0) {
  cc <- tryCatch(system2(file.path(R.home("bin"), "R"), c("CMD", "config", "CC"), stdout = TRUE, stderr = FALSE),
                 error = function(e) "cc")
  tools <- c(strsplit(trimws(cc[1]), " +")[[1]][1], "make")
  say("compilerMissing", tools[!nzchar(Sys.which(tools))])
}
`;

async function probe(options: Pick<PrerequisiteOptions, "rExecutable" | "library" | "packages">): Promise<Probe> {
  const run = await runR(options.rExecutable, PROBE, {
    ROCK_SETUP_LIB: options.library,
    ROCK_SETUP_PACKAGES: options.packages.join(","),
  });
  if (run.code !== 0) throw new SetupError(`R could not be run (${options.rExecutable}): ${lastLine(run.output)}`);
  const fields = new Map<string, string[]>();
  for (const line of run.output.split("\n")) {
    const [key, ...values] = line.split("\t");
    if (key)
      fields.set(
        key,
        values.filter((v) => v !== ""),
      );
  }
  if (!fields.has("missing")) throw new SetupError(`R (${options.rExecutable}) did not answer as R does: ${lastLine(run.output)}`);
  return {
    missing: fields.get("missing") ?? [],
    repos: fields.get("repos") ?? [],
    headers: fields.get("headers")?.[0] === "TRUE",
    compilerMissing: fields.get("compilerMissing") ?? [],
  };
}

const INSTALL = String.raw`
lib <- Sys.getenv("ROCK_SETUP_LIB")
.libPaths(c(.libPaths(), lib))
pkg <- Sys.getenv("ROCK_SETUP_PACKAGE")
repos <- strsplit(Sys.getenv("ROCK_SETUP_REPOS"), "\n", fixed = TRUE)[[1]]
# install.packages reports an unreachable repository or a failed compile as warnings only.
withCallingHandlers(
  utils::install.packages(pkg, lib = lib, repos = repos, quiet = TRUE),
  warning = function(w) cat("rock-setup-warning\t", gsub("\n", " ", conditionMessage(w)), "\n", sep = "")
)
if (!requireNamespace(pkg, quietly = TRUE)) quit(save = "no", status = 3)
`;

async function install(options: PrerequisiteOptions, name: string, repos: readonly string[]): Promise<void> {
  const log = join(options.library, `install-${name}.log`);
  const run = await runR(
    options.rExecutable,
    INSTALL,
    { ROCK_SETUP_LIB: options.library, ROCK_SETUP_PACKAGE: name, ROCK_SETUP_REPOS: repos.join("\n") },
    log,
  );
  if (run.code === 0) return;
  const why = firstWarning(run.output);
  throw new SetupError(
    `could not install the R package '${name}' from ${repos.join(", ")}: ${why} (log: ${log}); set ROCK_REPOS (packages.repos) to a reachable repository, or install '${name}' into R's library yourself`,
  );
}

/**
 * Why an install failed: install.packages says it in warnings only (the scripts print each on a
 * `rock-setup-warning` line); the first names the cause, later ones repeat it. Else R's last line.
 */
function firstWarning(output: string): string {
  const line = output.split("\n").find((l) => l.startsWith(WARNING));
  return line === undefined ? lastLine(output) : line.slice(WARNING.length).trim();
}
const WARNING = "rock-setup-warning\t";

function lastLine(text: string): string {
  return (
    text
      .trim()
      .split("\n")
      .filter((l) => l.trim() !== "")
      .pop() ?? "no output"
  );
}

function names(list: readonly string[]): string {
  return list.map((n) => `'${n}'`).join(", ");
}

function plural(list: readonly string[]): string {
  return list.length > 1 ? "s" : "";
}

const INSTALLED_VERSION = String.raw`
lib <- Sys.getenv("ROCK_SETUP_LIB")
if (dir.exists(lib)) .libPaths(c(.libPaths(), lib))
# R's libraries first, as the R server searches them (a container image carries it in the site library).
v <- tryCatch(format(utils::packageVersion(Sys.getenv("ROCK_SETUP_PACKAGE"))), error = function(e) "")
cat("version\t", v, "\n", sep = "")
`;

const INSTALL_SOURCE = String.raw`
withCallingHandlers(
  utils::install.packages(Sys.getenv("ROCK_SETUP_SOURCE"), lib = Sys.getenv("ROCK_SETUP_LIB"), repos = NULL, type = "source", quiet = TRUE),
  warning = function(w) cat("rock-setup-warning\t", gsub("\n", " ", conditionMessage(w)), "\n", sep = "")
)
.libPaths(c(Sys.getenv("ROCK_SETUP_LIB"), .libPaths()))
if (!requireNamespace(Sys.getenv("ROCK_SETUP_PACKAGE"), quietly = TRUE)) quit(save = "no", status = 3)
`;

/**
 * A package of this checkout's (its source folder `source`) built into the setup library unless the
 * version R finds is the source's: built from a copy, so that no build output lands in the checkout.
 */
export async function ensureLocalRPackage(options: {
  readonly rExecutable: string;
  readonly library: string;
  readonly source: string;
  readonly progress: (line: string) => void;
}): Promise<boolean> {
  const description = readFileSync(join(options.source, "DESCRIPTION"), "utf8");
  const name = /^Package:\s*(\S+)/m.exec(description)?.[1] ?? basename(options.source);
  const wanted = /^Version:\s*(\S+)/m.exec(description)?.[1];
  const probe = await runR(options.rExecutable, INSTALLED_VERSION, { ROCK_SETUP_PACKAGE: name, ROCK_SETUP_LIB: options.library });
  if (/^version\t(.*)$/m.exec(probe.output)?.[1]?.trim() === wanted) return false;
  options.progress(`building R package '${name}' ${wanted ?? ""} (this checkout's, compiled here) into ${options.library}`);
  mkdirSync(options.library, { recursive: true, mode: 0o755 });
  const work = mkdtempSync(join(tmpdir(), "rock-setup-"));
  try {
    const copy = join(work, name);
    cpSync(options.source, copy, { recursive: true });
    const log = join(options.library, `install-${name}.log`);
    const run = await runR(
      options.rExecutable,
      INSTALL_SOURCE,
      { ROCK_SETUP_SOURCE: copy, ROCK_SETUP_LIB: options.library, ROCK_SETUP_PACKAGE: name },
      log,
    );
    if (run.code !== 0) {
      const why = firstWarning(run.output);
      throw new SetupError(
        `could not build the R package '${name}' of this checkout: ${why} (log: ${log}); it needs a C compiler and R's headers (Debian: apt-get install gcc libc6-dev make)`,
      );
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return true;
}
