import { chmodSync, readdirSync, statSync } from "node:fs";
import { join, relative, resolve, sep } from "node:path";

/**
 * Keeps the data folder (catalogue, secrets, generated users, console log, R's own temporary folders)
 * out of sessions' reach: everything in it is private to the service's user, except the folders
 * sessions need (their own folders, a package library) which stay reachable by path. Run at start,
 * after every part created what it keeps there.
 */
export function protectDataFolder(dataDir: string, shared: readonly string[]): void {
  const root = resolve(dataDir);
  const sharedTops = new Set(shared.map((dir) => topEntryIn(root, dir)).filter((top): top is string => top !== undefined));
  // Others may pass through the data folder to a shared folder they know, never list or read it.
  chmodSync(root, sharedTops.size > 0 ? 0o711 : 0o700);
  for (const name of readdirSync(root)) {
    if (sharedTops.has(name)) continue;
    const path = join(root, name);
    chmodSync(path, statSync(path).isDirectory() ? 0o700 : 0o600);
  }
}

/** The entry of `root` that holds `dir`, if `dir` is inside `root`. */
function topEntryIn(root: string, dir: string): string | undefined {
  const rel = relative(root, resolve(dir));
  if (rel === "" || rel.startsWith("..") || rel.startsWith(sep)) return undefined;
  return rel.split(sep)[0];
}

/**
 * A configuration file holds user secrets: with sessions isolated, one that other users can read would
 * hand them to every session (its path is in the service's command line, readable by all).
 */
export function assertPrivateConfig(file: string): void {
  const mode = statSync(file).mode & 0o777;
  if ((mode & 0o004) !== 0) {
    throw new Error(
      `${file} is readable by every user (mode ${mode.toString(8).padStart(4, "0")}) and R sessions could read the secrets in it: chmod o-r ${file}`,
    );
  }
}
