import type { UserConfig } from "../config/config.js";
import type { Caller } from "./caller.js";
import { sha256, verifySecret } from "./secrets.js";

/** How long a verified name/password pair skips the (deliberately slow) hash check. */
const CACHE_TTL_MS = 5 * 60_000;
const CACHE_MAX = 10_000;
/** A well-formed bcrypt hash (cost 10) that no known password matches. */
const UNKNOWN_USER_SECRET = "{bcrypt}$2b$10$DVvE5haT7og8pbyI6tAvfOZM.p3m0oaKoolo6b39SuDeYun2Feuxb";

/**
 * The configured users. Verified credentials are cached by a digest of name and password (never the
 * password itself) so that bcrypt costs once per user, not once per request.
 */
export class UserDirectory {
  private readonly users: Map<string, UserConfig>;
  private readonly verified = new Map<string, { caller: Caller; until: number }>();

  constructor(users: readonly UserConfig[]) {
    this.users = new Map(users.map((u) => [u.name, u]));
  }

  async authenticate(name: string, password: string): Promise<Caller | undefined> {
    const key = sha256(`${name}\u0000${password}`).toString("base64");
    const hit = this.verified.get(key);
    const now = Date.now();
    if (hit && hit.until > now) return hit.caller;
    const user = this.users.get(name);
    // Unknown users pay a bcrypt comparison too, so that timing does not tell which names exist.
    const ok = await verifySecret(user?.secret ?? UNKNOWN_USER_SECRET, password);
    if (!user || !ok) return undefined;
    const caller: Caller = { name: user.name, roles: new Set(user.roles) };
    if (this.verified.size >= CACHE_MAX) this.verified.clear();
    this.verified.set(key, { caller, until: now + CACHE_TTL_MS });
    return caller;
  }
}

/** Parses `Basic base64(name:password)`; undefined for any other shape. */
export function parseBasic(header: string | null): { name: string; password: string } | undefined {
  if (!header || !/^basic /i.test(header)) return undefined;
  const decoded = Buffer.from(header.slice(6).trim(), "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon <= 0) return undefined;
  return { name: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
