/**
 * Session groups in cgroup v2: one folder per session under the engine's, in the one hierarchy. The
 * engine's group hands the memory, cpu and pids controllers to its children; v2 lets a group do so
 * only when it holds no process itself, so where this process's own group holds processes, they (the
 * service, and what started it in the same group) move into a leaf `rock-service` first.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { cgroupMounts, errorCode, killListed, listedProcesses, removeAll, removeChildren, trySet, workingSet } from "./cgroup-files.js";
import type { CgroupsUnavailable, CgroupTree, SessionGroup, SessionLimits } from "./cgroup-tree.js";

const CONTROLLERS = ["memory", "cpu", "pids"] as const;
/** Where the service's own processes go when its group must hold none. */
const LEAF = "rock-service";
/** cpu.max's period, µs (the kernel's default). */
const CPU_PERIOD = 100_000;

export class CgroupV2Tree implements CgroupTree {
  readonly version = 2;

  private constructor(private readonly base: string) {}

  /** `mountinfo` and `own` are /proc/self/mountinfo and /proc/self/cgroup. */
  static open(mountinfo: string, own: string, name: string, budgetBytes: number): CgroupV2Tree | CgroupsUnavailable {
    const mounts = cgroupMounts(mountinfo);
    const mount = mounts.find((m) => m.type === "cgroup2")?.mountPoint;
    const path = /^0::(\/.*)$/m.exec(own)?.[1];
    if (mount === undefined || path === undefined) return { unavailable: "no cgroup v2 hierarchy" };
    // A service that moved itself into its leaf before (an earlier engine of this process) keeps its
    // groups beside that leaf.
    const ownDir = join(mount, basename(path) === LEAF ? dirname(path) : path);
    const offered = words(join(ownDir, "cgroup.controllers"));
    const missing = CONTROLLERS.filter((c) => !offered.includes(c));
    if (missing.length > 0) {
      const inV1 = missing.every((c) => mounts.some((m) => m.type === "cgroup" && m.options.includes(c)));
      return {
        unavailable: `cgroup v2 offers no ${missing.join(", ")} controller here${inV1 ? " (this kernel has them in cgroup v1)" : ""}`,
      };
    }
    try {
      delegate(ownDir);
      const base = join(ownDir, name);
      mkdirSync(base, { recursive: true });
      if (budgetBytes > 0) {
        writeFileSync(join(base, "memory.max"), String(budgetBytes));
        // No swap for sessions: their limits are of real memory, which swapping would get round.
        trySet(join(base, "memory.swap.max"), "0");
      }
      delegate(base);
      return new CgroupV2Tree(base);
    } catch (e) {
      return { unavailable: `cgroup v2 cannot be written here (${errorCode(e)})` };
    }
  }

  async session(name: string, limits: SessionLimits): Promise<SessionGroup> {
    const dir = join(this.base, name);
    await mkdir(dir, { recursive: true });
    if (limits.memoryBytes > 0) {
      writeFileSync(join(dir, "memory.max"), String(limits.memoryBytes));
      trySet(join(dir, "memory.swap.max"), "0");
    }
    // Past its limit the whole session ends at once, not one of its processes at random.
    trySet(join(dir, "memory.oom.group"), "1");
    if (limits.cpuCores > 0)
      writeFileSync(join(dir, "cpu.max"), `${Math.max(1000, Math.round(CPU_PERIOD * limits.cpuCores))} ${CPU_PERIOD}`);
    if (limits.processes > 0) writeFileSync(join(dir, "pids.max"), String(limits.processes));
    const procs = join(dir, "cgroup.procs");
    return {
      add: (pid) => writeFile(procs, String(pid)),
      kill: () => {
        // cgroup.kill (Linux 5.14) ends the group in one pass, a process forking meanwhile included.
        try {
          writeFileSync(join(dir, "cgroup.kill"), "1");
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
          killListed(procs);
        }
      },
      empty: () => listedProcesses(procs).length === 0,
      oomKills: () => eventCount(join(dir, "memory.events"), "oom_kill"),
      // `oom` counts in the group whose own limit was reached (a parent's counts in the parent).
      reachedLimit: () => limits.memoryBytes > 0 && eventCount(join(dir, "memory.events"), "oom") > 0,
      memoryBytes: () => workingSet(join(dir, "memory.current"), join(dir, "memory.stat"), "inactive_file"),
      cpuSeconds: () => eventCount(join(dir, "cpu.stat"), "usage_usec") / 1e6,
      remove: () => removeAll([dir]),
    };
  }

  budgetOomKills(): number {
    return eventCount(join(this.base, "memory.events.local"), "oom");
  }

  memoryBytes(): number {
    return workingSet(join(this.base, "memory.current"), join(this.base, "memory.stat"), "inactive_file");
  }

  cpuSeconds(): number {
    return eventCount(join(this.base, "cpu.stat"), "usage_usec") / 1e6;
  }

  removeLeftovers(): string[] {
    return removeChildren(this.base);
  }

  async close(): Promise<void> {
    this.removeLeftovers();
    await removeAll([this.base]);
  }
}

/** Hands the controllers to `dir`'s children, moving `dir`'s own processes into a leaf when v2 requires it. */
function delegate(dir: string): void {
  const wanted = CONTROLLERS.filter((c) => !words(join(dir, "cgroup.subtree_control")).includes(c));
  if (wanted.length === 0) return;
  const enable = () => writeFileSync(join(dir, "cgroup.subtree_control"), wanted.map((c) => `+${c}`).join(" "));
  try {
    enable();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EBUSY") throw e;
    const leaf = join(dir, LEAF);
    mkdirSync(leaf, { recursive: true });
    for (const pid of readFileSync(join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean)) {
      try {
        writeFileSync(join(leaf, "cgroup.procs"), pid);
      } catch (moved) {
        if ((moved as NodeJS.ErrnoException).code !== "ESRCH") throw moved;
      }
    }
    enable();
  }
}

function words(file: string): string[] {
  try {
    return readFileSync(file, "utf8").trim().split(/\s+/);
  } catch {
    return [];
  }
}

/** A `key value` line's value in a flat-keyed cgroup file (memory.events, cpu.stat); 0 when absent. */
function eventCount(file: string, key: string): number {
  try {
    const m = new RegExp(`^${key} (\\d+)$`, "m").exec(readFileSync(file, "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}
