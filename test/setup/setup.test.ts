import { expect } from "chai";
import { execa } from "execa";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { DEFAULT_REPOSITORY, ensureLocalRPackage, ensureRPackages, missingRPackages } from "../../src/setup/r-prerequisites.js";
import { SetupError } from "../../src/setup/setup-error.js";
import { runMain } from "../support/main-process.js";

/** A source package with C code (so it must be compiled), in a file:// repository of its own. */
async function compiledPackageRepo(root: string, name: string): Promise<string> {
  const src = join(root, "source", name);
  mkdirSync(join(src, "src"), { recursive: true });
  mkdirSync(join(src, "R"));
  writeFileSync(
    join(src, "DESCRIPTION"),
    `Package: ${name}\nVersion: 0.0.1\nTitle: Setup Probe\nDescription: Compiled at test time.\nLicense: MIT\nAuthor: t\nMaintainer: t <t@example.org>\nNeedsCompilation: yes\n`,
  );
  writeFileSync(join(src, "NAMESPACE"), `useDynLib(${name})\nexport(twice)\n`);
  writeFileSync(join(src, "R", "twice.R"), `twice <- function(x) .Call("twice_c", as.numeric(x))\n`);
  writeFileSync(join(src, "src", "twice.c"), "#include <Rinternals.h>\nSEXP twice_c(SEXP x) { return Rf_ScalarReal(2 * REAL(x)[0]); }\n");
  const contrib = join(root, "repo", "src", "contrib");
  mkdirSync(contrib, { recursive: true });
  await execa("R", ["CMD", "build", "--no-manual", src], { cwd: contrib, stdin: "ignore" });
  await execa("R", ["--no-echo", "--no-save", "-e", "tools::write_PACKAGES(commandArgs(TRUE)[1], type = 'source')", "--args", contrib], {
    stdin: "ignore",
  });
  return pathToFileURL(join(root, "repo")).href;
}

/** A folder of links to every command of /usr/bin and /bin but `hidden`, to put on PATH instead of them. */
function pathWithout(root: string, hidden: readonly string[]): string {
  const bin = join(root, "bin");
  mkdirSync(bin, { recursive: true });
  for (const dir of ["/usr/bin", "/bin"]) {
    for (const name of readdirSync(dir)) {
      if (hidden.includes(name) || /^(gcc|cc|x86_64-linux-gnu-gcc)/.test(name)) continue;
      try {
        symlinkSync(join(dir, name), join(bin, name));
      } catch {
        // /bin and /usr/bin are often one folder: linked already
      }
    }
  }
  return bin;
}

describe("setup: the R packages the service needs, provided before it listens", function () {
  this.timeout(120_000);
  let root: string;
  let repo: string;
  const name = "rockSetupProbe";

  before(async () => {
    root = mkdtempSync(join(tmpdir(), "rock-setup-"));
    repo = await compiledPackageRepo(root, name);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it("installs a missing package into the setup library, compiling it, with one progress line; then nothing more", async () => {
    const library = join(root, "lib-install");
    expect(await missingRPackages("R", library, [name, "jsonlite"])).to.deep.equal([name]);
    const lines: string[] = [];
    const ready = await ensureRPackages({
      rExecutable: "R",
      library,
      packages: [name, "jsonlite"],
      repos: [repo],
      systemPackages: false,
      progress: (l) => lines.push(l),
    });
    expect(ready).to.deep.equal({ repos: [repo], installed: [name] });
    expect(lines).to.have.length(1);
    expect(lines[0]).to.include(`'${name}'`).and.include(library);
    // Compiled, and loadable by a later R that appends the library as the R server does.
    const r = await execa("R", ["--no-echo", "--no-save", "-e", `.libPaths(c(.libPaths(), '${library}')); cat(${name}::twice(21))`]);
    expect(r.stdout).to.equal("42");
    const again: string[] = [];
    expect(
      await ensureRPackages({
        rExecutable: "R",
        library,
        packages: [name],
        repos: [repo],
        systemPackages: false,
        progress: (l) => again.push(l),
      }),
    ).to.deep.equal({
      repos: [repo],
      installed: [],
    });
    expect(again).to.deep.equal([]);
  });

  it("stops with one line naming the package and the repository when the repository cannot be reached", async () => {
    const library = join(root, "lib-unreachable");
    const error = await ensureRPackages({
      rExecutable: "R",
      library,
      packages: [name],
      repos: ["http://127.0.0.1:9"],
      systemPackages: false,
      progress: () => {},
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(SetupError);
    const message = (error as Error).message;
    expect(message).to.not.include("\n");
    expect(message).to.match(
      new RegExp(`could not install the R package '${name}' from http://127.0.0.1:9: .*(connect|cannot open|unable)`, "i"),
    );
    expect(message).to.include("ROCK_REPOS");
  });

  it("stops with one line saying to install a compiler when a package must be compiled and there is none", async () => {
    const bin = pathWithout(join(root, "nocc"), ["make"]);
    const saved = process.env.PATH;
    process.env.PATH = bin;
    try {
      const error = await ensureRPackages({
        rExecutable: "R",
        library: join(root, "lib-nocc"),
        packages: [name],
        repos: [repo],
        systemPackages: false,
        progress: () => {},
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(SetupError);
      expect((error as Error).message).to.match(
        new RegExp(
          `'${name}' must be compiled and (gcc|cc), make are missing: install a C compiler \\(Debian: apt-get install gcc libc6-dev make`,
        ),
      );
    } finally {
      process.env.PATH = saved;
    }
  });

  it("takes R's own repositories (a site mirror) when packages.repos is empty, the default when R names none", async () => {
    const profile = join(root, "Rprofile.site");
    const saved = process.env.R_PROFILE;
    // The same setup each time but for the repositories asked for.
    const reposOf = (repos: string[]) =>
      ensureRPackages({
        rExecutable: "R",
        library: join(root, "lib-repos"),
        packages: ["jsonlite"],
        repos,
        systemPackages: false,
        progress: () => {},
      });
    try {
      process.env.R_PROFILE = profile;
      writeFileSync(profile, `options(repos = c(CRAN = "https://mirror.example.org/cran", extra = "https://packages.example.org"))\n`);
      const mirror = await reposOf([]);
      expect(mirror.repos).to.deep.equal(["https://mirror.example.org/cran", "https://packages.example.org"]);
      writeFileSync(profile, `options(repos = c(CRAN = "@CRAN@"))\n`);
      const unset = await reposOf([]);
      expect(unset.repos).to.deep.equal([DEFAULT_REPOSITORY]);
      const configured = await reposOf([repo]);
      expect(configured.repos).to.deep.equal([repo]);
    } finally {
      if (saved === undefined) delete process.env.R_PROFILE;
      else process.env.R_PROFILE = saved;
    }
  });

  it("the start stops before listening, with one line, when R is missing", async () => {
    const run = await runMain([], {
      env: { ROCK_R_EXECUTABLE: join(root, "no-such-R"), ROCK_DATA_DIR: join(root, "data-no-r"), ROCK_PORT: "0" },
    });
    expect(run.code).to.equal(1);
    const lines = run.stderr.trim().split("\n");
    expect(lines, run.stderr).to.have.length(1);
    expect(lines[0]).to.include("R was not found").and.include("apt-get install --no-install-recommends r-base-core");
    expect(run.stderr).to.not.include("listening");
  });

  it("the start installs what R's libraries lack, and stops before listening when it cannot", async () => {
    // R_LIBS_SITE naming an empty folder hides the site libraries (jsonlite, and unix where it is there) from
    // every R the start runs; the setup library is empty and the repository cannot be reached.
    const empty = join(root, "empty-site");
    mkdirSync(empty);
    const run = await runMain([], {
      env: {
        R_LIBS_SITE: empty,
        ROCK_R_SETUP_LIBRARY: join(root, "empty-lib"),
        ROCK_REPOS: "http://127.0.0.1:9",
        ROCK_DATA_DIR: join(root, "data-no-pkg"),
        ROCK_PORT: "0",
      },
      timeoutMs: 60_000,
    });
    expect(run.code, run.stderr).to.equal(1);
    expect(run.stderr).to.include("installing R package 'jsonlite'");
    expect(run.stderr).to.include("could not install the R package 'jsonlite' from http://127.0.0.1:9");
    expect(run.stderr).to.not.include("listening");
  });

  it("builds this checkout's rocksandbox into the setup library from a copy (nothing built lands in the checkout), once", async () => {
    const source = fileURLToPath(new URL("../../src/r/sandbox", import.meta.url));
    const library = join(root, "lib-local");
    // R's own libraries must not hold it, or there is nothing to build: hide the site libraries.
    const saved = process.env.R_LIBS_SITE;
    process.env.R_LIBS_SITE = join(root, "no-site");
    mkdirSync(process.env.R_LIBS_SITE, { recursive: true });
    try {
      const lines: string[] = [];
      expect(await ensureLocalRPackage({ rExecutable: "R", library, source, progress: (l) => lines.push(l) })).to.equal(true);
      expect(lines).to.have.length(1);
      const version = /^Version: (\S+)$/m.exec(readFileSync(join(source, "DESCRIPTION"), "utf8"))?.[1];
      expect(lines[0]).to.include(`'rocksandbox' ${version}`);
      expect(readdirSync(join(source, "src")).sort(), "the checkout's source folder").to.deep.equal([
        "init.c",
        "mounts.c",
        "network.c",
        "sandbox.h",
      ]);
      expect(readdirSync(library)).to.include("rocksandbox");
      expect(await ensureLocalRPackage({ rExecutable: "R", library, source, progress: (l) => lines.push(l) })).to.equal(false);
      expect(lines).to.have.length(1);
    } finally {
      if (saved === undefined) delete process.env.R_LIBS_SITE;
      else process.env.R_LIBS_SITE = saved;
    }
  });

  it("rock-ts setup says R is ready when nothing is missing", async () => {
    const run = await runMain(["setup"]);
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stderr).to.match(/rock-ts setup: R is ready \(packages from .+\)/);
  });
});
