import { BlockList, isIPv4, isIPv6 } from "node:net";
import { parseNetwork } from "../config/networks.js";

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
