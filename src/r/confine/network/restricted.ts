import { readFileSync } from "node:fs";
import { networkInterfaces } from "node:os";
import type { Destination, UidRange } from "../../../config/config.js";
import { hasCapability, NET_ADMIN, SYS_ADMIN } from "../capabilities.js";
import { mountsRefusedBy } from "../mounts.js";
import { onPath } from "../on-path.js";
import { NETWORK_COMMANDS, run } from "./commands.js";
import { DnsRelay } from "./dns-relay.js";
import { MAX_RANGE, type NetworkPlan, networkPlan } from "./plan.js";
import { parseResolvConf, sessionResolvConf } from "./resolv-conf.js";
import { forwardingOn, removeUplink, RouterNamespace } from "./router.js";
import { deleteHostTable, hostTable } from "./rules.js";

export interface RestrictedNetworkOptions {
  readonly range: UidRange;
  readonly allow: readonly Destination[];
  readonly deny: readonly Destination[];
  /** The resolv.conf whose resolvers sessions' names are resolved by. */
  readonly resolvConf?: string;
}

/** What sessions' network is: the host's, none, or restricted through the router of `links`. */
export type SessionNetwork =
  | { readonly policy: "host" }
  | { readonly policy: "none" }
  | { readonly policy: "restricted"; readonly links: RouterLinks };

/** What the R server is told, so that its forks join the router (see worker.R). */
export interface RouterLinks {
  /** The path the R server opens the router namespace at. */
  readonly router: string;
  /** The resolv.conf sessions see. */
  readonly resolvConf: string;
  /** The router's end of the link of the session of `uid`. */
  linkOf(uid: number): string;
}

/**
 * `r.sessionNetwork: restricted` for the sessions of one range: each session's network namespace is
 * linked to a router namespace of the service's (router.ts), whose only way out is an uplink into the
 * service's namespace, filtered there by a table of the range's (rules.ts); names are resolved through
 * a relay of the service's (dns-relay.ts). Made at start, replacing what a crashed run of the range
 * left; removed by close().
 */
export class RestrictedNetwork implements RouterLinks {
  private constructor(
    private readonly plan: NetworkPlan,
    private readonly namespace: RouterNamespace,
    private readonly relay: DnsRelay,
    readonly resolvConf: string,
  ) {}

  get router(): string {
    return this.namespace.path;
  }

  linkOf(uid: number): string {
    return this.plan.linkOf(uid);
  }

  /** Makes it all; throws saying what failed, having removed what it made. */
  static async open(options: RestrictedNetworkOptions): Promise<RestrictedNetwork> {
    const missing = missingForRestricted(options.range);
    if (missing) throw new Error(missing);
    const { range } = options;
    await removeUplink(networkPlan(range, () => false));
    const taken = new Set(
      Object.values(networkInterfaces())
        .flat()
        .map((i) => i?.address),
    );
    const plan = networkPlan(range, (address) => taken.has(address));
    await forwardingOn();
    const namespace = await RouterNamespace.open(plan);
    let relay: DnsRelay | undefined;
    try {
      const resolvers = parseResolvConf(readFileSync(options.resolvConf ?? "/etc/resolv.conf", "utf8"));
      relay = await DnsRelay.open(plan.hostAddress, resolvers.nameservers);
      const gateways = (await defaultGateways()).map((address): Destination => ({ address, prefix: 32 }));
      await run("nft", ["-f", "-"], hostTable({ plan, dns: relay.ports, allow: options.allow, deny: [...gateways, ...options.deny] }));
      return new RestrictedNetwork(plan, namespace, relay, sessionResolvConf(resolvers, plan.hostAddress));
    } catch (error) {
      await relay?.close();
      await namespace.close();
      throw error;
    }
  }

  /** Removes the table, the relay and the router (every session's link with it). */
  async close(): Promise<void> {
    await run("nft", ["-f", "-"], deleteHostTable(this.plan));
    await this.relay.close();
    await this.namespace.close();
  }
}

/**
 * What a crashed run of `range` left when this one does not restrict its sessions: its table (its
 * router went with that run). Nothing where nothing of it can be (no nft, no CAP_NET_ADMIN).
 */
export async function removeLeftoverNetwork(range: UidRange): Promise<void> {
  if (!hasCapability(NET_ADMIN) || !onPath("nft") || !onPath("ip")) return;
  const plan = networkPlan(range, () => false);
  await run("nft", ["-f", "-"], deleteHostTable(plan));
  await removeUplink(plan);
}

/**
 * Why sessions of `range` cannot have `restricted` here, saying how to provide it; undefined when they
 * can (the making itself may still fail, and says why).
 */
export function missingForRestricted(range: UidRange): string | undefined {
  if (!hasCapability(SYS_ADMIN))
    return "a network namespace per session needs CAP_SYS_ADMIN, which this process lacks (docker run --cap-add SYS_ADMIN; compose: cap_add)";
  const profile = mountsRefusedBy();
  if (profile)
    return `the sessions' resolv.conf is mounted in their mount namespaces, which the AppArmor profile ${profile} refuses (docker run --security-opt apparmor=unconfined; compose: security_opt)`;
  if (!hasCapability(NET_ADMIN))
    return "the sessions' router and filter need CAP_NET_ADMIN, which this process lacks (docker run --cap-add NET_ADMIN; compose: cap_add)";
  const absent = NETWORK_COMMANDS.filter((c) => !onPath(c.command));
  if (absent.length > 0) {
    const packages = [...new Set(absent.map((c) => c.debian))].join(" ");
    return `the command${absent.length > 1 ? "s" : ""} ${absent.map((c) => c.command).join(", ")} ${absent.length > 1 ? "are" : "is"} missing (apt-get install ${packages})`;
  }
  if (range.last - range.first + 1 > MAX_RANGE)
    return `r.sessionUids ${range.first}-${range.last} holds more than ${MAX_RANGE} uids, the most a restricted network has links for`;
  return undefined;
}

/** The IPv4 gateways of this namespace's default routes: the next hop, the Docker host in a container. */
async function defaultGateways(): Promise<string[]> {
  const routes: unknown = JSON.parse(await run("ip", ["-j", "-4", "route", "show", "default"]));
  if (!Array.isArray(routes)) return [];
  return routes.flatMap((route: unknown) =>
    typeof route === "object" && route !== null && "gateway" in route && typeof route.gateway === "string" ? [route.gateway] : [],
  );
}
