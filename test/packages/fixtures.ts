import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { execa } from "execa";

/**
 * A world of packages built at test time, all under one temporary folder: source packages made
 * with `R CMD build` in a `file://` repository indexed by `tools::write_PACKAGES`, a bare git
 * repository with two refs under a `file://` git host, an empty library to install into, and
 * R's per-user folders redirected so that nothing is written outside the temporary folder.
 */
export interface PackageWorld {
  readonly root: string;
  readonly library: string;
  readonly scratch: string;
  readonly repoUrl: string;
  readonly gitHost: string;
  readonly gitOrganization: string;
  /** Environment for every R the tests start. */
  readonly env: Record<string, string>;
  /**
   * Replaces the repository's version of a package by `version` (for update); `changes` alter the
   * package for that version (`{ broken: true }`: one that builds but fails to install).
   */
  publish(name: keyof typeof PACKAGES, version: string, changes?: Partial<TestPackage>): Promise<void>;
  dispose(): Promise<void>;
}

export interface TestPackage {
  readonly fields: Record<string, string>;
  /** Files under inst/, installed at the package's top level. */
  readonly inst?: Record<string, string>;
  /** R code that does not parse: builds, but fails to install. */
  readonly broken?: boolean;
  /** A configure script that says so, then waits a minute (a grandchild of R, for cancellation). */
  readonly slow?: boolean;
}

/** The archive's packages: an analysis package by DESCRIPTION, one by DATASHIELD file, a plain one, a broken one, a slow one. */
export const PACKAGES = {
  dsTestA: {
    fields: {
      AggregateMethods: "meanDS,\n    lengthDS=base::length ,",
      AssignMethods: "asFactorDS, cbindDS",
      Options: "datashield.privacyLevel=5",
    },
  },
  dsTestB: {
    fields: {},
    inst: {
      DATASHIELD: "AggregateMethods: summaryDS,\n  tableDS\nAssignMethods: dataFrameDS\nOptions: ds.b.option=TRUE\n",
    },
  },
  plainPkg: { fields: {} },
  brokenPkg: { fields: {}, broken: true },
  slowPkg: { fields: {}, slow: true },
} satisfies Record<string, TestPackage>;

export const GIT_PACKAGE = "gitPkg";
export const GIT_ORGANIZATION = "testorg";

const GIT_ENV = {
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_AUTHOR_NAME: "test",
  GIT_AUTHOR_EMAIL: "test@example.org",
  GIT_COMMITTER_NAME: "test",
  GIT_COMMITTER_EMAIL: "test@example.org",
};

async function writePackage(dir: string, name: string, version: string, pkg: TestPackage): Promise<void> {
  await mkdir(join(dir, "R"), { recursive: true });
  const fields: Record<string, string> = {
    Package: name,
    Version: version,
    Title: `Test Package ${name}`,
    Description: "A package built by the tests.",
    License: "MIT",
    Author: "Test",
    Maintainer: "Test <test@example.org>",
    Encoding: "UTF-8",
    ...pkg.fields,
  };
  const description = Object.entries(fields)
    .map(([key, value]) => `${key}: ${value}\n`)
    .join("");
  await writeFile(join(dir, "DESCRIPTION"), description);
  await writeFile(join(dir, "NAMESPACE"), "export(hello)\n");
  const code = pkg.broken ? "hello <- function( {\n" : `hello <- function() "${name} ${version}"\n`;
  await writeFile(join(dir, "R", "hello.R"), code);
  if (pkg.slow) {
    await writeFile(join(dir, "configure"), `#!/bin/sh\necho "configure: ${name} is waiting"\nsleep 60\n`, { mode: 0o755 });
  }
  for (const [file, content] of Object.entries(pkg.inst ?? {})) {
    await mkdir(join(dir, "inst"), { recursive: true });
    await writeFile(join(dir, "inst", file), content);
  }
}

export async function createPackageWorld(): Promise<PackageWorld> {
  const root = await mkdtemp(join(os.tmpdir(), "rock-packages-"));
  try {
    return await buildWorld(root);
  } catch (error) {
    await rm(root, { recursive: true, force: true });
    throw error;
  }
}

async function buildWorld(root: string): Promise<PackageWorld> {
  const library = join(root, "library");
  const scratch = join(root, "scratch");
  const contrib = join(root, "repo", "src", "contrib");
  const sources = join(root, "sources");
  const user = join(root, "user");
  for (const dir of [library, scratch, contrib, sources, user]) await mkdir(dir, { recursive: true });
  const env: Record<string, string> = {
    R_USER_CACHE_DIR: join(user, "cache"),
    R_USER_DATA_DIR: join(user, "data"),
    R_USER_CONFIG_DIR: join(user, "config"),
    R_LIBS_USER: join(user, "none"),
    TMPDIR: scratch,
    ...GIT_ENV,
  };
  const r = (args: string[], cwd: string) => execa("R", args, { cwd, env, stdin: "ignore" });

  const build = async (name: string, version: string, pkg: TestPackage) => {
    const dir = join(sources, `${name}-${version}`);
    await writePackage(dir, name, version, pkg);
    await r(["CMD", "build", "--no-manual", "--no-build-vignettes", "--no-resave-data", dir], contrib);
  };
  const index = () =>
    r(
      ["--no-echo", "--no-save", "--no-restore", "-e", "tools::write_PACKAGES(commandArgs(TRUE)[1], type = 'source')", "--args", contrib],
      root,
    );

  await Promise.all(Object.entries(PACKAGES).map(([name, pkg]) => build(name, "1.0.0", pkg)));
  await index();

  // A bare repository with `master` at 1.0.0 and the tag `v2` at 2.0.0 (ahead of master).
  const work = join(root, "git-work");
  const bare = join(root, "git", GIT_ORGANIZATION, GIT_PACKAGE);
  const git = (args: string[], cwd: string) => execa("git", args, { cwd, env: GIT_ENV, stdin: "ignore" });
  await writePackage(work, GIT_PACKAGE, "1.0.0", { fields: {} });
  await git(["init", "-q", "-b", "master"], work);
  await git(["add", "-A"], work);
  await git(["commit", "-q", "-m", "1.0.0"], work);
  await writePackage(work, GIT_PACKAGE, "2.0.0", { fields: {} });
  await git(["commit", "-q", "-a", "-m", "2.0.0"], work);
  await git(["tag", "v2"], work);
  await git(["reset", "-q", "--hard", "HEAD~1"], work);
  await mkdir(join(root, "git", GIT_ORGANIZATION), { recursive: true });
  await git(["clone", "-q", "--bare", work, bare], root);

  return {
    root,
    library,
    scratch,
    repoUrl: pathToFileURL(join(root, "repo")).href,
    gitHost: pathToFileURL(join(root, "git")).href,
    gitOrganization: GIT_ORGANIZATION,
    env,
    async publish(name, version, changes = {}) {
      for (const file of await readdir(contrib)) {
        if (file.startsWith(`${name}_`)) await rm(join(contrib, file));
      }
      await build(name, version, { ...PACKAGES[name], ...changes });
      await index();
    },
    async dispose() {
      await rm(root, { recursive: true, force: true });
    },
  };
}

/** Runs a fixed R expression on bytes written by `serialize()` (path in commandArgs) and returns what it prints. */
export async function inspectSerialized(world: PackageWorld, bytes: Uint8Array, expression: string): Promise<string> {
  const file = join(world.root, `serialized-${Date.now()}-${Math.random().toString(16).slice(2)}.bin`);
  await writeFile(file, bytes);
  try {
    const script = `x <- unserialize(readBin(commandArgs(TRUE)[1], "raw", file.size(commandArgs(TRUE)[1])))\n${expression}`;
    const { stdout } = await execa("R", ["--no-echo", "--no-save", "--no-restore", "-e", script, "--args", file], {
      env: world.env,
      stdin: "ignore",
    });
    return stdout.trim();
  } finally {
    await rm(file, { force: true });
  }
}

/** Processes whose environment mentions `marker` (R and everything R started carry the scratch path). */
export async function processesMentioning(marker: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const environ = await readFile(join("/proc", entry, "environ"), "latin1");
      if (environ.includes(marker)) found.push(Number(entry));
    } catch {
      // Gone, or not ours to read.
    }
  }
  return found;
}
