import type { Config } from "../config/config.js";
import { decideIsolation } from "../r/confine/isolation.js";
import { ensureRPackages, serviceRPackages } from "./r-prerequisites.js";

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
  return { ...config, packages: { ...config.packages, repos: ready.repos } };
}
