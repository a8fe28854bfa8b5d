import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The checkout's (or the image's) root, whether this runs as TypeScript (`<root>/src`, tsx: tests and
 * development) or compiled (`<root>/dist/src`, `npm start`): what is read at run time and not compiled —
 * the R scripts, gen/r/protocol.R, the sandbox's C sources, the setup library — is found from it, never
 * from a module's own place. The lock file is the root's alone (the build copies package.json).
 */
const above = dirname(dirname(fileURLToPath(import.meta.url)));
export const PACKAGE_ROOT = existsSync(join(above, "package-lock.json")) ? above : dirname(above);

/** A path under the root. */
export function fromRoot(...parts: string[]): string {
  return join(PACKAGE_ROOT, ...parts);
}
