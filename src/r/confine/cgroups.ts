/**
 * A control group per session, holding every process of the session — its R fork and all it starts,
 * which inherit the group: its real memory with swap bounded (the kernel's OOM killer ends the session
 * alone past it), a CPU weight equal to every other session's (and an optional cap in cores), a process
 * count. All sessions' groups sit in one group of the engine's, bounded by the sessions' memory budget,
 * which the service's own processes are outside of: when sessions together take too much, the kernel
 * ends sessions, never the service. cgroup v2 where its hierarchy offers the controllers (most current
 * hosts), v1 otherwise (cgroup-v1.ts, cgroup-v2.ts).
 */
import { readFileSync } from "node:fs";
import { CgroupV1Tree } from "./cgroup-v1.js";
import { CgroupV2Tree } from "./cgroup-v2.js";
import type { CgroupsUnavailable, CgroupTree } from "./cgroup-tree.js";

export type { CgroupsUnavailable, CgroupTree, SessionGroup, SessionLimits } from "./cgroup-tree.js";

/**
 * The engine's group `name` under this process's own group, created with the sessions' memory budget:
 * in cgroup v2 when its hierarchy offers memory, cpu and pids here, else in v1's; or why neither can.
 */
export function openCgroupTree(name: string, budgetBytes: number): CgroupTree | CgroupsUnavailable {
  const mountinfo = readFileSync("/proc/self/mountinfo", "utf8");
  const own = readFileSync("/proc/self/cgroup", "utf8");
  const v2 = CgroupV2Tree.open(mountinfo, own, name, budgetBytes);
  if (!("unavailable" in v2)) return v2;
  const v1 = CgroupV1Tree.open(mountinfo, own, name, budgetBytes);
  if (!("unavailable" in v1)) return v1;
  return { unavailable: `${v1.unavailable}; ${v2.unavailable}` };
}
