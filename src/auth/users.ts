import { hash, randomBytes } from "node:crypto";
import type { AuthConfig, UserConfig } from "../config/config.js";
import { defaults } from "../config/load.js";
import type { Caller } from "./caller.js";
import { HashPool, HashPoolFull } from "./hash-pool.js";
import { parseSecret } from "../config/secret-format.js";
import { clientKey, FailureThrottle, tooManyAttempts } from "./throttle.js";

/** How long a verified name/password pair skips the (deliberately slow) hash check. */
const CACHE_TTL_MS = 5 * 60_000;
const CACHE_MAX = 10_000;

/**
 * The configured users. Passwords are checked in worker threads (HashPool), failures are counted per
 * client (FailureThrottle), and verified credentials are cached by a keyed digest of name and
 * password (never the password, and a digest useless outside this process) so that bcrypt costs
 * once per user, not once per request.
 */
export class UserDirectory {
  private readonly users: Map<string, UserConfig>;
  private readonly verified = new Map<string, { caller: Caller; until: number }>();
  /** Credentials this process made for its own calls (grant()), by cache key, until revoked. */
  private readonly granted = new Map<string, Caller>();
  /** Checks under way by cache key: a burst of requests with the same new credentials pays for one. */
  private readonly checking = new Map<string, Promise<Caller | undefined>>();
  /**
   * A secret of this process that starts every cache key: the cache holds no password, nor anything
   * a guess could be checked against without it. One SHA-256 call per request (an HMAC object cost
   * several times as much on the request path).
   */
  private readonly keyPrefix = `${randomBytes(32).toString("base64")}\u0000`;
  private readonly pool: HashPool;
  private readonly throttle: FailureThrottle;

  constructor(users: readonly UserConfig[], auth: AuthConfig = defaults().auth) {
    // Users also come from outside the configuration (users.generated.yaml): a secret that could not be
    // checked fails here, at start, not at each login.
    for (const u of users) {
      try {
        parseSecret(u.secret);
      } catch (e) {
        throw new Error(`user '${u.name}': ${(e as Error).message}`);
      }
    }
    this.users = new Map(users.map((u) => [u.name, u]));
    this.pool = new HashPool({ workers: auth.hashWorkers, maxQueue: auth.hashQueue });
    this.throttle = new FailureThrottle({
      maxFailures: auth.maxFailures,
      windowMs: auth.failureWindowSeconds * 1000,
      maxClients: auth.trackedClients,
    });
  }

  /**
   * The caller these credentials name, undefined when they are wrong. Throws RESOURCE_EXHAUSTED when
   * `clientAddress` has failed too often, or when too many checks are waiting.
   */
  async authenticate(name: string, password: string, clientAddress?: string): Promise<Caller | undefined> {
    const client = clientKey(clientAddress);
    this.throttle.check(client);
    const key = this.keyOf(name, password);
    const own = this.granted.get(key);
    if (own) return own;
    const hit = this.verified.get(key);
    if (hit && hit.until > Date.now()) return hit.caller;
    let check = this.checking.get(key);
    if (!check) {
      const end = this.throttle.begin(client);
      check = this.check(name, password, key).finally(() => {
        this.checking.delete(key);
        end();
      });
      this.checking.set(key, check);
    }
    const caller = await check;
    if (!caller) this.throttle.fail(client);
    return caller;
  }

  /**
   * Credentials for the process's own calls through its own port (the warm-up): a random password of
   * 256 bits that is never stored, logged or hashed slowly, valid until `revoke()`. `name` should be
   * one no configured user has; a user of that name keeps their own password.
   */
  grant(name: string, roles: readonly string[]): { readonly name: string; readonly password: string; revoke(): void } {
    const password = randomBytes(32).toString("base64url");
    const key = this.keyOf(name, password);
    this.granted.set(key, { name, roles: new Set(roles) });
    return { name, password, revoke: () => void this.granted.delete(key) };
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private keyOf(name: string, password: string): string {
    return hash("sha256", `${this.keyPrefix}${name}\u0000${password}`, "base64");
  }

  private async check(name: string, password: string, key: string): Promise<Caller | undefined> {
    const user = this.users.get(name);
    // Unknown users are checked too (against a decoy), so that timing does not tell which names exist.
    const ok = await this.pool.verify(user?.secret ?? null, password).catch((e: unknown) => {
      throw e instanceof HashPoolFull ? tooManyAttempts("Too many authentication attempts in progress", 1) : e;
    });
    if (!user || !ok) return undefined;
    const caller: Caller = { name: user.name, roles: new Set(user.roles) };
    if (this.verified.size >= CACHE_MAX) this.verified.clear();
    this.verified.set(key, { caller, until: Date.now() + CACHE_TTL_MS });
    return caller;
  }
}
