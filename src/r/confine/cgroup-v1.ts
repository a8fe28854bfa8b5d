/**
 * Session groups in cgroup v1: one folder per controller (memory, cpu, cpuacct, pids), each under this
 * process's own group of that hierarchy.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  cgroupMounts,
  errorCode,
  killListed,
  listedProcesses,
  numberIn,
  removeAll,
  removeChildren,
  trySet,
  workingSet,
} from "./cgroup-files.js";
import type { CgroupsUnavailable, CgroupTree, SessionGroup, SessionLimits } from "./cgroup-tree.js";

type Controller = "memory" | "cpu" | "cpuacct" | "pids";
const CONTROLLERS: readonly Controller[] = ["memory", "cpu", "cpuacct", "pids"];
/** A peak this close to a limit reached it (the kernel charges and reclaims in pages and batches). */
const PEAK_MARGIN = 1048576;

export class CgroupV1Tree implements CgroupTree {
  readonly version = 1;

  private constructor(private readonly bases: Readonly<Record<Controller, string>>) {}

  /** `mountinfo` and `own` are /proc/self/mountinfo and /proc/self/cgroup. */
  static open(mountinfo: string, own: string, name: string, budgetBytes: number): CgroupV1Tree | CgroupsUnavailable {
    const mounts: Partial<Record<Controller, string>> = {};
    for (const m of cgroupMounts(mountinfo)) {
      if (m.type !== "cgroup") continue;
      for (const option of m.options) if (isController(option)) mounts[option] ??= m.mountPoint;
    }
    const paths = ownPaths(own);
    const missing = CONTROLLERS.filter((c) => mounts[c] === undefined || paths[c] === undefined);
    if (missing.length > 0) return { unavailable: `no cgroup v1 hierarchy for ${missing.join(", ")}` };
    const bases = Object.fromEntries(CONTROLLERS.map((c) => [c, join(mounts[c]!, paths[c]!, name)])) as Record<Controller, string>;
    try {
      for (const c of CONTROLLERS) mkdirSync(bases[c], { recursive: true });
      if (budgetBytes > 0) {
        writeFileSync(join(bases.memory, "memory.limit_in_bytes"), String(budgetBytes));
        trySet(join(bases.memory, "memory.memsw.limit_in_bytes"), String(budgetBytes));
      }
    } catch (e) {
      return { unavailable: `cgroup v1 cannot be written here (${errorCode(e)})` };
    }
    return new CgroupV1Tree(bases);
  }

  async session(name: string, limits: SessionLimits): Promise<SessionGroup> {
    const dirs = Object.fromEntries(CONTROLLERS.map((c) => [c, join(this.bases[c], name)])) as Record<Controller, string>;
    await Promise.all(CONTROLLERS.map((c) => mkdir(dirs[c], { recursive: true })));
    if (limits.memoryBytes > 0) {
      writeFileSync(join(dirs.memory, "memory.limit_in_bytes"), String(limits.memoryBytes));
      // Swap counted in: a session cannot go past its limit by swapping (where the kernel accounts swap).
      trySet(join(dirs.memory, "memory.memsw.limit_in_bytes"), String(limits.memoryBytes));
    }
    if (limits.cpuCores > 0) {
      const period = Number(readFileSync(join(dirs.cpu, "cpu.cfs_period_us"), "utf8"));
      writeFileSync(join(dirs.cpu, "cpu.cfs_quota_us"), String(Math.max(1000, Math.round(period * limits.cpuCores))));
    }
    if (limits.processes > 0) writeFileSync(join(dirs.pids, "pids.max"), String(limits.processes));
    // A process joins memory's group first (`add`): none of the session's is anywhere else.
    const procs = join(dirs.memory, "cgroup.procs");
    return {
      async add(pid) {
        for (const c of CONTROLLERS) await writeFile(join(dirs[c], "cgroup.procs"), String(pid));
      },
      kill: () => killListed(procs),
      empty: () => listedProcesses(procs).length === 0,
      oomKills: () => oomKillsIn(dirs.memory),
      // The kernel's fail counters stay 0 when reclaim gives up and the OOM killer acts: the peak tells.
      reachedLimit: () =>
        limits.memoryBytes > 0 &&
        Math.max(
          numberIn(join(dirs.memory, "memory.max_usage_in_bytes")),
          numberIn(join(dirs.memory, "memory.memsw.max_usage_in_bytes")),
        ) >=
          limits.memoryBytes - PEAK_MARGIN,
      memoryBytes: () => workingSet(join(dirs.memory, "memory.usage_in_bytes"), join(dirs.memory, "memory.stat"), "total_inactive_file"),
      cpuSeconds: () => numberIn(join(dirs.cpuacct, "cpuacct.usage")) / 1e9,
      remove: () => removeAll(Object.values(dirs)),
    };
  }

  budgetOomKills(): number {
    return oomKillsIn(this.bases.memory);
  }

  memoryBytes(): number {
    return workingSet(join(this.bases.memory, "memory.usage_in_bytes"), join(this.bases.memory, "memory.stat"), "total_inactive_file");
  }

  cpuSeconds(): number {
    return numberIn(join(this.bases.cpuacct, "cpuacct.usage")) / 1e9;
  }

  removeLeftovers(): string[] {
    return CONTROLLERS.flatMap((c) => removeChildren(this.bases[c]));
  }

  async close(): Promise<void> {
    this.removeLeftovers();
    await removeAll(Object.values(this.bases));
  }
}

function isController(name: string): name is Controller {
  return (CONTROLLERS as readonly string[]).includes(name);
}

/** This process's own group in each v1 hierarchy (/proc/self/cgroup: `id:controllers:path`). */
function ownPaths(cgroup: string): Partial<Record<Controller, string>> {
  const out: Partial<Record<Controller, string>> = {};
  for (const line of cgroup.split("\n")) {
    const [, controllers = "", path] = line.split(":");
    if (path === undefined) continue;
    for (const c of controllers.split(",")) if (isController(c)) out[c] = path;
  }
  return out;
}

function oomKillsIn(memoryDir: string): number {
  const m = /^oom_kill (\d+)$/m.exec(readFileSync(join(memoryDir, "memory.oom_control"), "utf8"));
  return m ? Number(m[1]) : 0;
}
