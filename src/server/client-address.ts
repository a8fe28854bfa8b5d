import { isIP } from "node:net";

interface Request {
  readonly socket: { readonly remoteAddress?: string | undefined };
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
}

/**
 * The client's address as the service counts it (failed logins, auth.openNetworks): the socket's, or —
 * when the socket is a proxy of server.trustedProxies (a load balancer: every client would otherwise
 * share its address, and ten bad logins lock everyone out) — the nearest address in X-Forwarded-For
 * that no trusted proxy added. A header from any other peer is never believed.
 */
export function clientAddressOf(trusted: (address: string | undefined) => boolean): (req: Request) => string | undefined {
  return (req) => {
    const peer = req.socket.remoteAddress;
    if (!trusted(peer)) return peer;
    const header = req.headers["x-forwarded-for"];
    const hops = (Array.isArray(header) ? header.join(",") : (header ?? "")).split(",").map((s) => s.trim());
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]!;
      if (isIP(hop) === 0) return peer;
      if (!trusted(hop)) return hop;
    }
    return peer;
  };
}
