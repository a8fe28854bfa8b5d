import { readFileSync } from "node:fs";

/** The container runtimes' default AppArmor profiles, each of which refuses every mount(2). */
const REFUSING = ["docker-default", "cri-containerd.apparmor.d", "containers-default"];

/**
 * The AppArmor profile that confines this process in enforce mode and refuses mounts (a container
 * runtime's default); undefined when none does.
 */
export function mountsRefusedBy(): string | undefined {
  // /proc/self/attr/current is also SELinux's: read it only where AppArmor is on.
  const enabled = (() => {
    try {
      return readFileSync("/sys/module/apparmor/parameters/enabled", "utf8").trim() === "Y";
    } catch {
      return false;
    }
  })();
  if (!enabled) return undefined;
  for (const file of ["/proc/self/attr/apparmor/current", "/proc/self/attr/current"]) {
    try {
      const label = readFileSync(file, "utf8").replace(/\0/g, "").trim();
      return REFUSING.some((name) => label.startsWith(name)) && !label.endsWith("(complain)") ? label : undefined;
    } catch {
      // no such interface, or not AppArmor's
    }
  }
  return undefined;
}
