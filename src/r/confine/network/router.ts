import { spawn } from "node:child_process";
import { once } from "node:events";
import { closeSync, openSync } from "node:fs";
import { run } from "./commands.js";
import type { NetworkPlan } from "./plan.js";
import { routerTable } from "./rules.js";

/** Turns IPv4 forwarding on in the namespace it runs in, when off (a new namespace copies the host's). */
const FORWARDING_ON = '[ "$(cat /proc/sys/net/ipv4/ip_forward)" = 1 ] || echo 1 > /proc/sys/net/ipv4/ip_forward';

/**
 * The router namespace sessions' links lead to: a network namespace that only this process keeps
 * alive, through a descriptor (and the R server, which opens it again for its forks; sessions close
 * theirs before they run code). When the service ends, however it ends, the kernel deletes the
 * namespace and with it every session's link and the uplink: a session that outlives the service keeps
 * its own loopback and nothing else. Its one link to the service's namespace is the uplink, `host` in
 * the router.
 */
export class RouterNamespace {
  private constructor(
    private readonly fd: number,
    private readonly plan: NetworkPlan,
  ) {}

  /** The path the R server opens the router at (a descriptor of this process). */
  get path(): string {
    return `/proc/${process.pid}/fd/${this.fd}`;
  }

  /** Makes the router and its uplink, the host's end of which replaces any of that name (a crashed run's). */
  static async open(plan: NetworkPlan): Promise<RouterNamespace> {
    await removeUplink(plan);
    // A process in a new namespace only long enough for this one to hold it by a descriptor.
    const helper = spawn("unshare", ["--net", "--", "sh", "-c", "echo; exec cat"], { stdio: ["pipe", "pipe", "pipe"] });
    let stderr = "";
    helper.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    const [started] = await Promise.race([once(helper.stdout, "data"), once(helper, "close")]);
    if (started === null || typeof started === "number" || helper.pid === undefined)
      throw new Error(`unshare --net: ${stderr.trim() || "could not make a network namespace"}`);
    const pid = helper.pid;
    let fd: number | undefined;
    try {
      fd = openSync(`/proc/${pid}/ns/net`, "r");
      const inside = [`--net=/proc/${pid}/ns/net`, "--"];
      await run(
        "ip",
        ["-batch", "-"],
        lines(
          `link add ${plan.uplink} type veth peer name host netns ${pid}`,
          `address add ${plan.hostAddress}/30 dev ${plan.uplink}`,
          `link set ${plan.uplink} up`,
        ),
      );
      await run(
        "nsenter",
        [...inside, "ip", "-batch", "-"],
        lines(
          "link set lo up",
          `address add ${plan.routerAddress}/30 dev host`,
          "link set host up",
          `route add default via ${plan.hostAddress}`,
        ),
      );
      await run("nsenter", [...inside, "sh", "-c", `${FORWARDING_ON} && exec nft -f -`], routerTable());
      return new RouterNamespace(fd, plan);
    } catch (error) {
      if (fd !== undefined) closeSync(fd);
      await removeUplink(plan);
      throw error;
    } finally {
      helper.stdin.end();
    }
  }

  /** Deletes the uplink (and so every session's link) now, and lets the namespace go. */
  async close(): Promise<void> {
    await removeUplink(this.plan);
    closeSync(this.fd);
  }
}

/** Deletes the host's end of the uplink, and so the whole link; nothing when there is none. */
export async function removeUplink(plan: NetworkPlan): Promise<void> {
  await run("ip", ["link", "delete", plan.uplink]).catch((error: Error) => {
    if (!/Cannot find device|does not exist/.test(error.message)) throw error;
  });
}

/** Turns IPv4 forwarding on in this process's namespace, when off; throws saying how to provide it. */
export async function forwardingOn(): Promise<void> {
  await run("sh", ["-c", FORWARDING_ON]).catch(() => {
    throw new Error(
      "IPv4 forwarding is off in the service's network namespace (net.ipv4.ip_forward 0) and /proc/sys cannot be written: turn it on (a container: docker run --sysctl net.ipv4.ip_forward=1; compose: sysctls)",
    );
  });
}

function lines(...commands: string[]): string {
  return `${commands.join("\n")}\n`;
}
