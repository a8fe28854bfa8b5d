import { isIPv4, isIPv6 } from "node:net";

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
