import { BlockList, isIPv4, isIPv6 } from "node:net";

/** `address/prefix` (or a bare address, its own network), IPv4 or IPv6; throws naming what is wrong. */
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

/** Whether a client address belongs to one of the networks (an IPv4 client seen as ::ffff:a.b.c.d counts as IPv4). */
export function networkMatcher(networks: readonly string[], key: string): (address: string | undefined) => boolean {
  const list = new BlockList();
  for (const text of networks) {
    const n = parseNetwork(text, key);
    list.addSubnet(n.address, n.prefix, n.family);
  }
  return (address) => {
    if (address === undefined || networks.length === 0) return false;
    const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
    if (v4 !== undefined) return list.check(v4, "ipv4");
    return isIPv4(address) ? list.check(address, "ipv4") : isIPv6(address) && list.check(address, "ipv6");
  };
}
