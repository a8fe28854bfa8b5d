import type { Config } from "./config/config.js";
import { parseDestination } from "./config/networks.js";
import { hasCapability, SYS_ADMIN } from "./r/confine/capabilities.js";
import { mountsRefusedBy } from "./r/confine/mounts.js";
import { RestrictedNetwork, removeLeftoverNetwork } from "./r/confine/network/restricted.js";
import { protectFromOomKiller, SessionQuotas } from "./r/confine/quotas.js";
import type { Logger } from "./server/logger.js";

// How the configuration's confinement of sessions (r.quotas, r.sessionNetwork, r.sessionTmp,
// r.sessionFilesystem) is had on this host, or refused, or given up with a warning: startRock's choices.

/**
 * A control group per isolated session (r.quotas), and the service out of the OOM killer's reach; where
 * the host gives no cgroup, the rlimits alone, said once (`required` refuses to start instead).
 */
export function sessionQuotas(config: Config, isolated: boolean, logger: Logger): SessionQuotas | undefined {
  const { r } = config;
  if (!isolated || r.quotas === "off") return undefined;
  const opened = SessionQuotas.open({
    name: `${r.sessionUids.first}-${r.sessionUids.last}`,
    sessionMemoryMb: r.sessionMemoryMb,
    sessionsMemoryMb: r.sessionsMemoryMb,
    sessionCpuCores: r.sessionCpuCores,
    sessionProcesses: r.sessionProcesses,
  });
  if (!(opened instanceof SessionQuotas)) {
    if (r.quotas === "required") throw new Error(`r.quotas is 'required' but ${opened.unavailable}`);
    logger.warn(
      `R sessions have no quotas: ${opened.unavailable}. Each session process keeps its rlimits (r.sessionMemoryMb as address space, r.sessionProcesses), but nothing bounds a session's total memory or CPU, or all sessions' memory (docs/security.md, Security model)`,
    );
    return undefined;
  }
  if (!protectFromOomKiller()) {
    logger.warn(
      "the service cannot take itself out of the OOM killer's reach (oom_score_adj -1000 needs CAP_SYS_RESOURCE): sessions (+1000) stay its first choice",
    );
  }
  return opened;
}

/** r.sessionNetwork none is asked for explicitly: where it cannot be had, the start is refused rather than open. */
export function assertNoNetwork(config: Config, isolated: boolean): void {
  if (config.r.sessionNetwork !== "none") return;
  if (!isolated) throw new Error("r.sessionNetwork is 'none' but sessions are not isolated (the service is not root)");
  if (!hasCapability(SYS_ADMIN))
    throw new Error("r.sessionNetwork is 'none' but a network namespace per session needs CAP_SYS_ADMIN, which this process lacks");
}

/**
 * r.sessionNetwork as it can be had. `restricted` asked for explicitly and out of reach refuses the
 * start, naming what is missing; `auto` then gives sessions the host's network and says why at every
 * start. Whatever the policy, what a crashed restricted run of the range left goes.
 */
export async function sessionNetwork(
  config: Config,
  isolated: boolean,
  logger: Logger,
): Promise<{ readonly policy: "host" | "none" } | { readonly policy: "restricted"; readonly links: RestrictedNetwork }> {
  const { r } = config;
  if (r.sessionNetwork === "host" || r.sessionNetwork === "none") {
    // A table left behind opens nothing (it matches an uplink gone with its run): not removing it is said, not fatal.
    if (isolated)
      await removeLeftoverNetwork(r.sessionUids).catch((e: Error) =>
        logger.warn("what a restricted session network of an earlier run left could not be removed", { error: e.message }),
      );
    return { policy: r.sessionNetwork };
  }
  let reason: string;
  if (!isolated) reason = "sessions are not isolated (the service does not run as root)";
  else {
    try {
      const links = await RestrictedNetwork.open({
        range: r.sessionUids,
        allow: r.sessionNetworkAllow.map((d) => parseDestination(d, "r.sessionNetworkAllow")),
        deny: r.sessionNetworkDeny.map((d) => parseDestination(d, "r.sessionNetworkDeny")),
      });
      return { policy: "restricted", links };
    } catch (e) {
      reason = (e as Error).message;
    }
  }
  if (r.sessionNetwork === "restricted") throw new Error(`r.sessionNetwork is 'restricted' but ${reason}`);
  logger.warn(
    `R sessions have the host's network (r.sessionNetwork auto): ${reason}. They can connect to every address the host can, its loopback and the cloud's metadata address included (docs/security.md, Session network)`,
  );
  return { policy: "host" };
}

/**
 * r.sessionTmp private and r.sessionFilesystem minimal: a mount namespace per session, which takes
 * CAP_SYS_ADMIN (a container may lack it); without, the host's files, said once.
 */
export function sessionView(config: Config, isolated: boolean, logger: Logger): { privateTmp: boolean; minimalFilesystem: boolean } {
  const privateTmp = isolated && config.r.sessionTmp === "private";
  const minimalFilesystem = isolated && config.r.sessionFilesystem === "minimal";
  const profile = mountsRefusedBy();
  if (!(privateTmp || minimalFilesystem) || (hasCapability(SYS_ADMIN) && !profile)) return { privateTmp, minimalFilesystem };
  const lost = [
    minimalFilesystem ? "see the host's whole file system" : "",
    privateTmp ? "share the host's /tmp, /var/tmp and /dev/shm" : "",
  ]
    .filter(Boolean)
    .join(" and ");
  const meant = [minimalFilesystem ? "r.sessionFilesystem: host" : "", privateTmp ? "r.sessionTmp: shared" : ""].filter(Boolean).join(", ");
  const why = profile
    ? `the AppArmor profile ${profile} refuses the mounts a mount namespace per session is made with (docker run --security-opt apparmor=unconfined)`
    : "a mount namespace per session needs CAP_SYS_ADMIN, which this process lacks";
  logger.warn(`R sessions ${lost}: ${why} (${meant} says this is meant)`);
  return { privateTmp: false, minimalFilesystem: false };
}
