import type { UidRange } from "../../../config/config.js";

/**
 * Where a range's restricted network lives, all named by its `r.sessionUids` so that servers of other
 * ranges keep theirs: the nftables table in the service's network namespace, the host's end of the
 * uplink to the router namespace, and addresses. Every address is link-local (169.254.0.0/16), which
 * sessions may never reach anyway, so none of them hides a destination a session needs: the uplink's
 * /30 from 169.254.64.0/18 (the host's end is an address of the host, one per range), each session's
 * /31 from 169.254.128.0/17 inside the router (where only that range's sessions are).
 */
export interface NetworkPlan {
  /** The nftables table (family inet) in the service's namespace. */
  readonly table: string;
  /** The host's end of the uplink; the router's end is named `host`. */
  readonly uplink: string;
  /** The uplink's /30: the host's end is `.1`, the router's `.2` (as offsets from `network`). */
  readonly hostAddress: string;
  readonly routerAddress: string;
  /** The router's end of the link of the session of `uid` (the session's end is the next address, a /31). */
  linkOf(uid: number): string;
}

/** Sessions' links are /31s of 169.254.128.0/17: this many uids at most. */
export const MAX_RANGE = 16_384;

const UPLINKS = ip("169.254.64.0");
const UPLINK_COUNT = 4096;
const LINKS = ip("169.254.128.0");

/** Devices' names have at most 15 characters: the range when it fits, else its first uid. */
const IFNAMSIZ = 15;

/**
 * The plan of `range`, its uplink the first /30 of 169.254.64.0/18, from the one its first uid points
 * at, that `taken` (addresses the host has already) leaves free.
 */
export function networkPlan(range: UidRange, taken: (address: string) => boolean): NetworkPlan {
  const name = `${range.first}-${range.last}`;
  const whole = `rk${name}`;
  let slot = range.first % UPLINK_COUNT;
  for (let tried = 0; tried < UPLINK_COUNT && [1, 2].some((n) => taken(dotted(UPLINKS + slot * 4 + n))); tried++) {
    slot = (slot + 1) % UPLINK_COUNT;
  }
  return {
    table: `rock-ts-${name}`,
    uplink: whole.length <= IFNAMSIZ ? whole : `rk${range.first}`,
    hostAddress: dotted(UPLINKS + slot * 4 + 1),
    routerAddress: dotted(UPLINKS + slot * 4 + 2),
    linkOf: (uid) => dotted(LINKS + (uid - range.first) * 2),
  };
}

function ip(text: string): number {
  return text.split(".").reduce((n, part) => n * 256 + Number(part), 0);
}

function dotted(n: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join(".");
}
