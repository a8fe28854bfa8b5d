import type { Destination } from "../../../config/config.js";
import type { NetworkPlan } from "./plan.js";

/** What the host's table lets sessions do besides reaching public and private networks. */
export interface HostRules {
  readonly plan: NetworkPlan;
  /** Where the service relays sessions' name queries (port 53 of the host's end of the uplink is sent there). */
  readonly dns: { readonly udp: number; readonly tcp: number };
  /** Reached whatever else says, checked first. */
  readonly allow: readonly Destination[];
  /** Refused besides link-local addresses and the host's own. */
  readonly deny: readonly Destination[];
}

/**
 * The table of the service's network namespace, as one `nft -f` transaction that replaces any table of
 * that name (a crashed run's): sessions' traffic arrives from the router on the uplink; to an address of
 * this host it is input, refused but for the name relay and allowed destinations; to anywhere else it
 * is forwarded, refused for link-local addresses and denied destinations (allowed ones first), and
 * leaves masqueraded as the host. A refusal answers at once: a TCP reset, or ICMP for anything else.
 * Nothing else of the host's traffic is touched (every chain starts by matching the uplink).
 */
export function hostTable({ plan, dns, allow, deny }: HostRules): string {
  const from = `iifname "${plan.uplink}"`;
  const relay = `ip daddr ${plan.hostAddress}`;
  return [
    `table inet ${plan.table} {}`,
    `delete table inet ${plan.table}`,
    `table inet ${plan.table} {`,
    chain("dns", "type nat hook prerouting priority dstnat; policy accept;", [
      `${from} ${relay} udp dport 53 redirect to :${dns.udp}`,
      `${from} ${relay} tcp dport 53 redirect to :${dns.tcp}`,
    ]),
    chain("input", "type filter hook input priority filter; policy accept;", [`${from} jump to_host`]),
    chain("to_host", undefined, [
      `${relay} udp dport ${dns.udp} accept`,
      `${relay} tcp dport ${dns.tcp} accept`,
      ...allow.map((d) => `${match(d)} accept`),
      "jump refuse",
    ]),
    chain("forward", "type filter hook forward priority filter; policy accept;", [`${from} jump onward`]),
    chain("onward", undefined, [
      ...allow.map((d) => `${match(d)} accept`),
      "ip daddr 169.254.0.0/16 jump refuse",
      ...deny.map((d) => `${match(d)} jump refuse`),
    ]),
    chain("refuse", undefined, ["meta l4proto tcp reject with tcp reset", "reject with icmpx admin-prohibited"]),
    chain("postrouting", "type nat hook postrouting priority srcnat; policy accept;", [`${from} masquerade`]),
    "}",
    "",
  ].join("\n");
}

/**
 * The router namespace's table: it forwards sessions' traffic only up to the host (never from one
 * session's link to another's), answers only what came back, and masquerades as its uplink address, so
 * the host needs no route to sessions' links.
 */
export function routerTable(): string {
  return [
    "table ip rock-ts {",
    chain("forward", "type filter hook forward priority filter; policy accept;", [
      'iifname != "host" oifname "host" accept',
      'iifname "host" ct state established,related accept',
      "meta l4proto tcp reject with tcp reset",
      "reject with icmp type admin-prohibited",
    ]),
    chain("postrouting", "type nat hook postrouting priority srcnat; policy accept;", ['oifname "host" masquerade']),
    "}",
    "",
  ].join("\n");
}

/** Deletes the host's table (nothing when there is none). */
export function deleteHostTable(plan: NetworkPlan): string {
  return `table inet ${plan.table} {}\ndelete table inet ${plan.table}\n`;
}

function chain(name: string, base: string | undefined, rules: readonly string[]): string {
  return [`  chain ${name} {`, ...(base ? [`    ${base}`] : []), ...rules.map((r) => `    ${r}`), "  }"].join("\n");
}

/** A destination's match; a port means TCP and UDP to it. */
function match(d: Destination): string {
  const daddr = `ip daddr ${d.address}/${d.prefix}`;
  return d.port === undefined ? daddr : `${daddr} meta l4proto { tcp, udp } th dport ${d.port}`;
}
