import { isIPv4, isIPv6 } from "node:net";
import type { Destination } from "./config.js";

/**
 * A network as the settings that list networks write it (`auth.openNetworks`, `server.trustedProxies`):
 * `address/prefix` (or a bare address, its own network), IPv4 or IPv6; throws naming what is wrong.
 */
export function parseNetwork(
  text: string,
  key: string,
): { readonly address: string; readonly prefix: number; readonly family: "ipv4" | "ipv6" } {
  const [address = "", bits, extra] = text.trim().split("/");
  const family = isIPv4(address) ? "ipv4" : isIPv6(address) ? "ipv6" : undefined;
  const max = family === "ipv4" ? 32 : 128;
  const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
  if (family === undefined || extra !== undefined || !(prefix >= 0 && prefix <= max)) {
    throw new Error(`${key}: expected networks such as 10.0.0.0/8 or fd00::/8, not '${text}'`);
  }
  return { address, prefix, family };
}

/**
 * A destination of `r.sessionNetworkAllow` / `r.sessionNetworkDeny`: an IPv4 network (`10.0.0.0/8`, or
 * a bare address) with an optional port (`10.0.0.5:5432`, `10.1.0.0/16:443`); throws naming what is
 * wrong. IPv4 only: sessions of `restricted` reach IPv4 destinations alone.
 */
export function parseDestination(text: string, key: string): Destination {
  const match = /^([^:]+?)(?::(\d{1,5}))?$/.exec(text.trim());
  const port = match?.[2] === undefined ? undefined : Number(match[2]);
  const network = match?.[1] !== undefined && isIPv4(match[1].split("/")[0] ?? "") ? networkOrNothing(match[1], key) : undefined;
  if (network === undefined || (port !== undefined && !(port >= 1 && port <= 65535))) {
    throw new Error(`${key}: expected IPv4 networks, each with an optional port, such as 10.0.0.0/8 or 192.168.1.5:5432, not '${text}'`);
  }
  return { address: network.address, prefix: network.prefix, ...(port === undefined ? {} : { port }) };
}

function networkOrNothing(text: string, key: string): ReturnType<typeof parseNetwork> | undefined {
  try {
    return parseNetwork(text, key);
  } catch {
    return undefined;
  }
}
