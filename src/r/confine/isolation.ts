import { createHash } from "node:crypto";
import { statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import type { RConfig } from "../../config/config.js";

export interface Isolation {
  /** Sessions run as uids of their own (the service runs as root). */
  readonly isolated: boolean;
  /** Why sessions are not isolated: said loudly at start. */
  readonly warning?: string;
}

/**
 * Sessions can be given uids of their own only by root. Without root they run as the service's user,
 * which the service says loudly, or refuses when `r.isolation` is `required`.
 */
export function decideIsolation(config: RConfig, uid: number | undefined = process.getuid?.()): Isolation {
  if (uid === 0) return { isolated: true };
  const why = `the service runs as uid ${uid ?? "?"}, not root, so it cannot give R sessions uids of their own`;
  if (config.isolation === "required") throw new Error(`r.isolation is 'required' but ${why}`);
  return {
    isolated: false,
    warning: `R SESSIONS ARE NOT ISOLATED: ${why}. Every session runs as this service's user and can read its data folder, its configuration and other sessions' files, and signal its processes. Run the service as root (sessions then drop to r.sessionUids) or set r.isolation: required to refuse to start like this.`,
  };
}

/**
 * Where sessions' folders live. An isolated session must reach its folder by path (getwd(), tempdir()),
 * so every folder above it needs search permission for others; when the data folder's ancestors lack
 * it, sessions live under the system's temporary folder instead (one folder per data folder).
 */
export function sessionsRoot(config: RConfig, dataDir: string, isolated: boolean): string {
  if (config.sessionsDir !== "") return resolve(config.sessionsDir);
  const inData = join(resolve(dataDir), "sessions");
  if (!isolated || searchableByOthers(dirname(resolve(dataDir)))) return inData;
  const tag = createHash("sha256").update(resolve(dataDir)).digest("hex").slice(0, 12);
  return join(tmpdir(), `rock-sessions-${tag}`);
}

/** Whether others (isolated sessions) can list `dir` and pass through every folder above it; false when it is missing. */
export function listableByOthers(dir: string): boolean {
  try {
    return (statSync(dir).mode & 0o004) !== 0 && searchableByOthers(dir);
  } catch {
    return false;
  }
}

/** Every folder from `dir` up to the root has o+x. */
export function searchableByOthers(dir: string): boolean {
  for (let d = resolve(dir); ; d = dirname(d)) {
    try {
      if ((statSync(d).mode & 0o001) === 0) return false;
    } catch {
      return false;
    }
    if (dirname(d) === d) return true;
  }
}
