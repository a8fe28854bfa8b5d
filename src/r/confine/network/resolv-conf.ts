import { isIP } from "node:net";

/** What a resolv.conf says: its name servers, and its other lines (search domains, options). */
export interface Resolvers {
  readonly nameservers: readonly string[];
  readonly rest: readonly string[];
}

/** Reads the text of a resolv.conf; a `nameserver` line whose address is not an IP address is left out. */
export function parseResolvConf(text: string): Resolvers {
  const nameservers: string[] = [];
  const rest: string[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const [word, value = ""] = line.split(/\s+/);
    if (word !== "nameserver") rest.push(line);
    // A scoped IPv6 address (fe80::1%eth0) keeps its zone: the relay sends from the host's namespace.
    else if (isIP(value) !== 0) nameservers.push(value);
  }
  return { nameservers, rest };
}

/**
 * The resolv.conf sessions see: one name server, the relay at `relay` (a session's own loopback is not
 * the host's, so the host's resolvers are reached through it), and the host's search domains and
 * options.
 */
export function sessionResolvConf(resolvers: Resolvers, relay: string): string {
  return [`nameserver ${relay}`, ...resolvers.rest, ""].join("\n");
}
