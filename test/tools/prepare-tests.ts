/**
 * `npm test` runs this first (npm's pretest): it provides what the suite needs beyond `npm install`, the
 * same way the service provides what it needs, and says what it installs:
 * - the service's own R packages (src/setup), a C compiler through apt when one is missing;
 * - Debian packages the tests drive: chromium (the /docs page), haproxy (the cluster), curl, openssl and
 *   git (clients, certificates, a git package source), and the R packages
 *   Debian builds (rockr's dependencies, remotes and BiocManager for package operations), through apt
 *   when running as root;
 * - what Debian does not package (rockr, the R client on CRAN), or everything when apt cannot be used,
 *   from CRAN into the setup library.
 * When something cannot be provided it stops with one line that says what, and exits 1.
 */
import { defaults } from "../../src/config/load.js";
import { canInstallDebianPackages, installDebianPackages, onPath } from "../../src/setup/debian-packages.js";
import { ensureRPackages, missingRPackages } from "../../src/setup/r-prerequisites.js";
import { prepareService } from "../../src/setup/service-prerequisites.js";
import { SetupError } from "../../src/setup/setup-error.js";

/** Commands the tests run, and the Debian package of each. */
const COMMANDS = [
  { command: "chromium", debian: "chromium", use: "the /docs page test drives it headless" },
  { command: "haproxy", debian: "haproxy", use: "the cluster test balances nodes with it" },
  { command: "curl", debian: "curl", use: "tests call the server with it, over HTTP/1.1, HTTP/2 and TLS" },
  { command: "openssl", debian: "openssl", use: "the TLS tests make their certificates with it" },
  { command: "git", debian: "git", use: "package tests install from a git repository" },
  {
    command: "nft",
    debian: "nftables",
    use: "the session network tests read the tables of their namespaces (the service needs it for r.sessionNetwork restricted)",
  },
  { command: "ip", debian: "iproute2", use: "the session network tests make their namespaces and links with it" },
] as const;

/** R packages the tests load; `debian` when Debian builds it (installed prebuilt, no compiler needed). */
const R_PACKAGES = [
  { name: "httr", debian: "r-cran-httr" },
  { name: "mime", debian: "r-cran-mime" },
  { name: "progress", debian: "r-cran-progress" },
  { name: "remotes", debian: "r-cran-remotes" },
  { name: "BiocManager", debian: "r-cran-biocmanager" },
  // Armadillo ends a busy session through ps (test/interop/armadillo-replay.test.ts, test/r/peer-signals.test.ts).
  { name: "ps", debian: "r-cran-ps" },
  { name: "rockr", debian: undefined },
] as const;

const say = (line: string): void => {
  process.stderr.write(`npm test: ${line}\n`);
};

async function prepare(): Promise<void> {
  const config = defaults();
  await prepareService(config, { systemPackages: true, progress: say });
  const { executable } = config.r;
  const library = config.r.setupLibrary;
  const missing = await missingRPackages(
    executable,
    library,
    R_PACKAGES.map((p) => p.name),
  );
  const apt = canInstallDebianPackages();
  const commands = COMMANDS.filter((c) => !onPath(c.command));
  const fromDebian = apt ? R_PACKAGES.filter((p) => missing.includes(p.name) && p.debian !== undefined) : [];
  if (commands.length > 0 && !apt) {
    const c = commands[0]!;
    throw new SetupError(
      `${c.command} is missing (${c.use}): install the Debian package ${commands.map((x) => x.debian).join(" ")}, or run npm test as root, which installs it`,
    );
  }
  const debian = [...commands.map((c) => c.debian), ...fromDebian.map((p) => p.debian!)];
  if (debian.length > 0) await installDebianPackages(debian, "for the tests", say);
  const fromCran = missing.filter((name) => !fromDebian.some((p) => p.name === name));
  if (fromCran.length > 0) {
    await ensureRPackages({
      rExecutable: executable,
      library,
      packages: fromCran,
      repos: config.packages.repos,
      systemPackages: true,
      progress: say,
    });
  }
}

try {
  await prepare();
} catch (e) {
  say(e instanceof SetupError ? e.message : String((e as Error).stack ?? e));
  process.exit(1);
}
