import { Fault } from "../errors/fault.js";

export interface ThrottleOptions {
  /** Failed logins a client may have in a window; <= 0 disables the throttle. */
  readonly maxFailures: number;
  readonly windowMs: number;
  /** Clients remembered at once; the oldest is forgotten past it, so a flood cannot grow memory. */
  readonly maxClients: number;
}

interface Entry {
  failures: number;
  /** Password checks under way, each a failure to come. */
  checking: number;
  /** End of the window opened by the first failure. */
  until: number;
}

/**
 * Failed logins per client in a fixed window that opens with the first failure: past the limit the
 * client's attempts, whatever credentials they carry, are refused until the window ends. Correct
 * credentials are refused too, or a blocked client could still test guesses against the cache of
 * verified credentials. Other clients are not affected.
 */
export class FailureThrottle {
  /** In order of the last window opened (or first check): the front is what to forget first. */
  private readonly clients = new Map<string, Entry>();

  constructor(private readonly opts: ThrottleOptions) {}

  /** Throws RESOURCE_EXHAUSTED while `client` has used up its failures. */
  check(client: string): void {
    const e = this.current(client);
    if (e && e.failures >= this.opts.maxFailures)
      throw tooManyAttempts("Too many failed authentication attempts from this address", this.secondsLeft(e));
  }

  /**
   * Before a password check: the checks under way count as failures to come, so that a client cannot
   * start more of them at once than it has failures left. Returns the function that ends it.
   */
  begin(client: string): () => void {
    if (this.opts.maxFailures <= 0) return () => {};
    const e = this.current(client) ?? this.add(client, { failures: 0, checking: 0, until: 0 });
    if (e.failures + e.checking >= this.opts.maxFailures) {
      throw tooManyAttempts("Too many authentication attempts at once from this address", e.failures > 0 ? this.secondsLeft(e) : 1);
    }
    e.checking++;
    return () => {
      e.checking--;
      if (e.failures === 0 && e.checking === 0 && this.clients.get(client) === e) this.clients.delete(client);
    };
  }

  fail(client: string): void {
    if (this.opts.maxFailures <= 0) return;
    const e = this.current(client) ?? this.add(client, { failures: 0, checking: 0, until: 0 });
    if (e.failures === 0) {
      e.until = Date.now() + this.opts.windowMs;
      this.clients.delete(client);
      this.add(client, e);
    }
    e.failures++;
  }

  /** The client's entry with an ended window reset; undefined when nothing is left to remember. */
  private current(client: string): Entry | undefined {
    const e = this.clients.get(client);
    if (!e) return undefined;
    if (e.failures > 0 && e.until <= Date.now()) e.failures = 0;
    if (e.failures > 0 || e.checking > 0) return e;
    this.clients.delete(client);
    return undefined;
  }

  private add(client: string, e: Entry): Entry {
    while (this.clients.size >= Math.max(1, this.opts.maxClients)) {
      const oldest = this.clients.keys().next().value as string;
      this.clients.delete(oldest);
    }
    this.clients.set(client, e);
    return e;
  }

  private secondsLeft(e: Entry): number {
    return Math.max(1, Math.ceil((e.until - Date.now()) / 1000));
  }
}

/** The answer to a refused login: 429 with Retry-After over REST, RESOURCE_EXHAUSTED elsewhere. */
export function tooManyAttempts(message: string, retryAfterSeconds: number): Fault {
  return new Fault("limit", `${message}; retry in ${retryAfterSeconds} s`, { retryAfterSeconds });
}

/**
 * What failures are counted by: the address, with IPv4-mapped IPv6 as IPv4, and IPv6 by its /64
 * (one host commonly holds a whole /64, so single IPv6 addresses cost an attacker nothing).
 */
export function clientKey(address: string | undefined): string {
  if (!address) return "unknown";
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  // A socket's remote address: IPv6 exactly when it holds a colon (no validating regular expression per request).
  if (!address.includes(":")) return address;
  return `${expandIPv6(address).slice(0, 4).join(":")}::/64`;
}

/** The eight groups of an IPv6 address (`::` expanded); an embedded IPv4 tail is two groups. */
function expandIPv6(address: string): string[] {
  const text = address
    .replace(/%.*$/, "")
    .replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_, a: string, b: string, c: string, d: string) =>
      [(+a << 8) | +b, (+c << 8) | +d].map((n) => n.toString(16)).join(":"),
    );
  const [head = "", tail] = text.split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const zeros = tail === undefined ? [] : new Array<string>(8 - left.length - right.length).fill("0");
  return [...left, ...zeros, ...right].map((g) => parseInt(g, 16).toString(16));
}
