import type { Config } from "../config/config.js";
import { decideIsolation } from "../r/confine/isolation.js";
import { fromRoot } from "../package-root.js";
import { hasCapability, NET_ADMIN, SYS_ADMIN } from "../r/confine/capabilities.js";
import { NETWORK_COMMANDS } from "../r/confine/network/commands.js";
import { onPath } from "../r/confine/on-path.js";
import { canInstallDebianPackages, installDebianPackages } from "./debian-packages.js";
import { ensureLocalRPackage, ensureRPackages, serviceRPackages } from "./r-prerequisites.js";

/** The source of the R package that gives sessions their private temporary folders. */
const SANDBOX_SOURCE = fromRoot("src/r/sandbox");

export interface SetupOptions {
  /** May install a C compiler with apt when one is missing (`rock-ts setup`, run by `npm install`). */
  readonly systemPackages: boolean;
  /** One line per install. */
  readonly progress: (line: string) => void;
}

/**
 * Provides what `config`'s service needs from R (README "Quick start"), and answers the configuration
 * with the repositories package operations will use resolved. Throws SetupError with one line to say.
 */
export async function prepareService(config: Config, options: SetupOptions): Promise<Config> {
  // r.isolation: required without root is refused here already, as the start would refuse it.
  const { isolated } = decideIsolation(config.r);
  const ready = await ensureRPackages({
    rExecutable: config.r.executable,
    library: config.r.setupLibrary,
    packages: serviceRPackages(isolated),
    repos: config.packages.repos,
    systemPackages: options.systemPackages,
    progress: options.progress,
  });
  // Private temporary folders for isolated sessions where the service may make mount namespaces: this
  // checkout's package rocksandbox (C), built once the compiler is there (the packages above needed it).
  const restrictable = isolated && (config.r.sessionNetwork === "restricted" || config.r.sessionNetwork === "auto");
  if (
    isolated &&
    (config.r.sessionTmp === "private" || config.r.sessionFilesystem === "minimal" || config.r.sessionNetwork !== "host") &&
    hasCapability(SYS_ADMIN)
  )
    await ensureLocalRPackage({
      rExecutable: config.r.executable,
      library: config.r.setupLibrary,
      source: SANDBOX_SOURCE,
      progress: options.progress,
    });
  // r.sessionNetwork restricted (or auto) where it can be had: the commands that make the sessions'
  // router and filter, through apt. Where apt cannot run, the start says what is missing (auto: once,
  // giving sessions the host's network; restricted: refusing to start).
  const commands = NETWORK_COMMANDS.filter((c) => !onPath(c.command));
  if (
    restrictable &&
    hasCapability(SYS_ADMIN) &&
    hasCapability(NET_ADMIN) &&
    commands.length > 0 &&
    options.systemPackages &&
    canInstallDebianPackages()
  )
    await installDebianPackages(
      [...new Set(commands.map((c) => c.debian))],
      "for the R sessions' restricted network (r.sessionNetwork)",
      options.progress,
    );
  return { ...config, packages: { ...config.packages, repos: ready.repos } };
}
