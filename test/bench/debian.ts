/**
 * What the peer sections need from Debian and CRAN, installed by the bench itself when it can, and a
 * sentence saying why not when it cannot, so a section skips a peer aloud instead of failing the run.
 */
import { execFile } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Whether `command` is on the PATH. */
export async function hasCommand(command: string): Promise<boolean> {
  try {
    await run("sh", ["-c", `command -v ${command}`]);
    return true;
  } catch {
    return false;
  }
}

/** Whether every Debian package is installed (dpkg's own status, not a file guessed from it). */
export async function debianInstalled(packages: readonly string[]): Promise<boolean> {
  try {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format, not a template
    const { stdout } = await run("dpkg-query", ["-W", "-f", "${db:Status-Abbrev}\\n", ...packages]);
    const lines = stdout.split("\n").filter((l) => l.trim() !== "");
    return lines.length === packages.length && lines.every((l) => l.startsWith("ii"));
  } catch {
    return false;
  }
}

/**
 * Installs the Debian packages that `present` finds missing; undefined once `present` holds, else why
 * not. apt-get's lists are refreshed once if the first install cannot find a package (a fresh machine
 * has none).
 */
export async function ensureDebian(
  what: string,
  packages: readonly string[],
  present: () => Promise<boolean> = () => debianInstalled(packages),
): Promise<string | undefined> {
  if (await present()) return undefined;
  const list = packages.join(" ");
  if (process.getuid?.() !== 0) return `${what} is missing (Debian: ${list}) and this is not root to install it`;
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const install = () =>
    run("apt-get", ["install", "-y", "-q", "--no-install-recommends", ...packages], { env, maxBuffer: 64 << 20, timeout: 15 * 60_000 });
  try {
    await install();
  } catch {
    try {
      await run("apt-get", ["update", "-q"], { env, maxBuffer: 64 << 20, timeout: 10 * 60_000 });
      await install();
    } catch (e) {
      return `${what} is missing and apt-get install ${list} failed: ${lastLine(e)}`;
    }
  }
  return (await present()) ? undefined : `${what} is still missing after apt-get install ${list}`;
}

/**
 * The bench's own R library (never the project's r-library, never R's site library): CRAN packages
 * that Debian does not ship go here, kept between runs so a second run does not build them again.
 */
export async function benchRLibrary(): Promise<string> {
  const base = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  const lib = join(base, "rock-bench", "r-library");
  await mkdir(lib, { recursive: true });
  return lib;
}

/** Whether R finds `pkg` with `lib` first on its library path. */
export async function rHas(lib: string, pkg: string): Promise<boolean> {
  try {
    await run("Rscript", ["--vanilla", "-e", `suppressMessages(library(${pkg}, lib.loc = c(${JSON.stringify(lib)}, .libPaths())))`], {
      timeout: 60_000,
    });
    return true;
  } catch {
    return false;
  }
}

/**
 * Installs CRAN packages into `lib` from the repository R is configured with (getOption("repos")),
 * dependencies found in Debian's R library first; undefined once R loads every one of `checks`, else
 * why not.
 */
export async function ensureCran(
  what: string,
  lib: string,
  packages: readonly string[],
  checks: readonly string[],
): Promise<string | undefined> {
  const loadable = async () => {
    for (const c of checks) if (!(await rHas(lib, c))) return false;
    return true;
  };
  if (await loadable()) return undefined;
  const check = checks.at(-1)!;
  const pkgs = `c(${packages.map((p) => JSON.stringify(p)).join(", ")})`;
  // Not --vanilla: that would drop the site profile that names R's repository here.
  const script = `.libPaths(c(${JSON.stringify(lib)}, .libPaths())); install.packages(${pkgs}, lib = ${JSON.stringify(lib)}, Ncpus = 2L, quiet = TRUE); if (!suppressWarnings(requireNamespace(${JSON.stringify(check)}, quietly = TRUE))) quit(status = 1)`;
  try {
    await run("Rscript", ["-e", script], { maxBuffer: 64 << 20, timeout: 20 * 60_000 });
  } catch (e) {
    return `${what}: install.packages(${packages.join(", ")}) failed: ${lastLine(e)}`;
  }
  return (await loadable()) ? undefined : `${what}: R still cannot load ${checks.join(", ")} after install.packages into ${lib}`;
}

/** The lines that say what went wrong (R's install warnings end with advice, not the cause). */
function lastLine(e: unknown): string {
  const err = e as { stderr?: string; message?: string };
  const text = (err.stderr || err.message || String(e))
    .trim()
    .split("\n")
    .filter((l) => l.trim() !== "");
  const causes = text.filter((l) => /not available|non-zero exit|error|E: /i.test(l));
  return (causes.length > 0 ? causes.slice(-3) : text.slice(-3)).join(" / ").slice(0, 400);
}
