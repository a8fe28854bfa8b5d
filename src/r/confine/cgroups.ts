/**
 * A control group per session (cgroup v1: the memory, cpu, cpuacct and pids hierarchies), holding
 * every process of the session — its R fork and all it starts, which inherit the group: its real memory
 * with swap bounded (the kernel's OOM killer ends the session alone past it), a CPU weight equal to every
 * other session's (and an optional cap in cores), a process count. All sessions' groups sit in one group
 * of the engine's, bounded by the sessions' memory budget, which the service's own processes are outside
 * of: when sessions together take too much, the kernel ends sessions, never the service.
 */
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

type Controller = "memory" | "cpu" | "cpuacct" | "pids";
/** A peak this close to a limit reached it (the kernel charges and reclaims in pages and batches). */
const PEAK_MARGIN = 1048576;
const CONTROLLERS: readonly Controller[] = ["memory", "cpu", "cpuacct", "pids"];

export interface SessionLimits {
  /** Memory with swap, bytes; 0: none. */
  readonly memoryBytes: number;
  /** CPU time per second of wall time, in cores; 0: no cap (the weight alone shares it). */
  readonly cpuCores: number;
  /** Processes (and threads) at once; 0: none. */
  readonly processes: number;
}

export interface SessionGroup {
  /** Moves a process (and so what it starts later) into the group. */
  add(pid: number): void;
  /** Times the kernel's OOM killer ended a process of this group (for its limit or a parent's). */
  oomKills(): number;
  /** Whether the group's memory ever reached its own limit (not a parent's). */
  reachedLimit(): boolean;
  /** Memory the group uses now, bytes. */
  memoryBytes(): number;
  /** CPU time the group used, seconds. */
  cpuSeconds(): number;
  /** Removes the group once its processes are gone (a group still holding one is left, and said). */
  remove(): boolean;
}

/** Where the engine's groups live, one folder per controller; undefined fields: a controller not mounted. */
export class CgroupTree {
  private constructor(private readonly bases: Readonly<Record<Controller, string>>) {}

  /**
   * The engine's group `name` under this process's own group of each v1 controller, created with the
   * sessions' memory budget; or why there is none (no v1 hierarchy, nothing writable).
   */
  static open(name: string, budgetBytes: number): CgroupTree | { readonly unavailable: string } {
    const mountinfo = readFileSync("/proc/self/mountinfo", "utf8");
    const mounts = v1Mounts(mountinfo);
    const own = ownPaths(readFileSync("/proc/self/cgroup", "utf8"));
    const missing = CONTROLLERS.filter((c) => mounts[c] === undefined || own[c] === undefined);
    if (missing.length > 0) {
      const v2 = /\bcgroup2\b/.test(mountinfo);
      return { unavailable: `no cgroup v1 hierarchy for ${missing.join(", ")}${v2 ? " (this host has cgroup v2, which quotas do not use yet)" : ""}` };
    }
    const bases = Object.fromEntries(CONTROLLERS.map((c) => [c, join(mounts[c]!, own[c]!, name)])) as Record<Controller, string>;
    try {
      for (const c of CONTROLLERS) mkdirSync(bases[c], { recursive: true });
      if (budgetBytes > 0) {
        writeFileSync(join(bases.memory, "memory.limit_in_bytes"), String(budgetBytes));
        trySet(join(bases.memory, "memory.memsw.limit_in_bytes"), String(budgetBytes));
      }
    } catch (e) {
      return { unavailable: `cgroups cannot be written here (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})` };
    }
    return new CgroupTree(bases);
  }

  /** A new group for a session, with its limits set. */
  session(name: string, limits: SessionLimits): SessionGroup {
    const dirs = Object.fromEntries(CONTROLLERS.map((c) => [c, join(this.bases[c], name)])) as Record<Controller, string>;
    for (const c of CONTROLLERS) mkdirSync(dirs[c], { recursive: true });
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
    return {
      add(pid) {
        for (const c of CONTROLLERS) writeFileSync(join(dirs[c], "cgroup.procs"), String(pid));
      },
      oomKills: () => oomKillsIn(dirs.memory),
      // The kernel's fail counters stay 0 when reclaim gives up and the OOM killer acts: the peak tells.
      reachedLimit: () =>
        limits.memoryBytes > 0 &&
        Math.max(numberIn(join(dirs.memory, "memory.max_usage_in_bytes")), numberIn(join(dirs.memory, "memory.memsw.max_usage_in_bytes"))) >= limits.memoryBytes - PEAK_MARGIN,
      memoryBytes: () => numberIn(join(dirs.memory, "memory.usage_in_bytes")),
      cpuSeconds: () => numberIn(join(dirs.cpuacct, "cpuacct.usage")) / 1e9,
      remove: () => removeAll(Object.values(dirs)),
    };
  }

  /** Times the budget's OOM killer ended a session process because all sessions together took too much. */
  budgetOomKills(): number {
    return oomKillsIn(this.bases.memory);
  }

  /** Memory all sessions use now, bytes. */
  memoryBytes(): number {
    return numberIn(join(this.bases.memory, "memory.usage_in_bytes"));
  }

  /** CPU time all sessions used (those ended included), seconds. */
  cpuSeconds(): number {
    return numberIn(join(this.bases.cpuacct, "cpuacct.usage")) / 1e9;
  }

  /** Removes session groups a crashed run left (their processes already ended); what stays is said. */
  removeLeftovers(): string[] {
    const left: string[] = [];
    for (const c of CONTROLLERS) {
      for (const entry of readdirSync(this.bases[c], { withFileTypes: true })) {
        if (!entry.isDirectory()) continue;
        try {
          rmdirSync(join(this.bases[c], entry.name));
        } catch {
          left.push(join(this.bases[c], entry.name));
        }
      }
    }
    return left;
  }

  /** Removes the engine's own groups (at close, once every session ended). */
  close(): void {
    this.removeLeftovers();
    removeAll(Object.values(this.bases));
  }
}

/** Mount points of the cgroup v1 hierarchies, by controller (from mountinfo's super options). */
function v1Mounts(mountinfo: string): Partial<Record<Controller, string>> {
  const out: Partial<Record<Controller, string>> = {};
  for (const line of mountinfo.split("\n")) {
    const [left, right] = line.split(" - ");
    if (!left || !right) continue;
    const [fstype, , superOptions = ""] = right.split(" ");
    if (fstype !== "cgroup") continue;
    const mountPoint = left.split(" ")[4]!;
    for (const option of superOptions.split(",")) if ((CONTROLLERS as readonly string[]).includes(option)) out[option as Controller] ??= mountPoint;
  }
  return out;
}

/** This process's own group in each v1 hierarchy (/proc/self/cgroup: `id:controllers:path`). */
function ownPaths(cgroup: string): Partial<Record<Controller, string>> {
  const out: Partial<Record<Controller, string>> = {};
  for (const line of cgroup.split("\n")) {
    const [, controllers = "", path] = line.split(":");
    if (path === undefined) continue;
    for (const c of controllers.split(",")) if ((CONTROLLERS as readonly string[]).includes(c)) out[c as Controller] = path;
  }
  return out;
}

function oomKillsIn(memoryDir: string): number {
  const m = /^oom_kill (\d+)$/m.exec(readFileSync(join(memoryDir, "memory.oom_control"), "utf8"));
  return m ? Number(m[1]) : 0;
}

function numberIn(file: string): number {
  try {
    return Number(readFileSync(file, "utf8").trim()) || 0;
  } catch {
    return 0;
  }
}

/** Sets a limit the kernel may not have (swap accounting off): absent is fine, refused is not. */
function trySet(file: string, value: string): void {
  try {
    writeFileSync(file, value);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
}

function removeAll(dirs: readonly string[]): boolean {
  let all = true;
  for (const dir of dirs) {
    try {
      rmdirSync(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") all = false;
    }
  }
  return all;
}
