/**
 * Per-session quotas on the kernel's control groups (cgroups.ts): each isolated session's processes in a
 * group of their own with its memory (swap included), CPU and process limits, all inside the sessions'
 * memory budget; sessions are the OOM killer's first choice and the service its last. Where no group can
 * be made, the rlimits of the fork stay the only bounds, which the service says once at start.
 */
import { writeFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { type CgroupTree, openCgroupTree, type SessionGroup } from "./cgroups.js";

export interface QuotaSettings {
  /** The uid range `first-last`: one engine per range, so it names the engine's group. */
  readonly name: string;
  /** Each session's memory with swap, MiB; <= 0: none. */
  readonly sessionMemoryMb: number;
  /** All sessions' memory together, MiB; <= 0: none. */
  readonly sessionsMemoryMb: number;
  /** Each session's CPU cap in cores; <= 0: none. */
  readonly sessionCpuCores: number;
  readonly sessionProcesses: number;
}

/** A session's group, and why its processes ended when the kernel ended them. */
export interface SessionQuota {
  readonly group: SessionGroup;
  /** Places the session's first process (its R fork) and what it starts in the group. */
  place(pid: number): Promise<void>;
  /** A memory limit that ended the session, said for its caller; undefined: not that. */
  endedBy(): string | undefined;
}

/** Memory a new session needs to start (a fork of the R server shares most of its pages). */
const NEW_SESSION_BYTES = 64 * 1048576;

export class SessionQuotas {
  private budgetKills = 0;

  private constructor(
    private readonly tree: CgroupTree,
    private readonly settings: QuotaSettings,
  ) {}

  /** The quotas, or why the host gives none. */
  static open(settings: QuotaSettings): SessionQuotas | { readonly unavailable: string } {
    const tree = openCgroupTree(`rock-sessions-${settings.name}`, mib(settings.sessionsMemoryMb));
    if ("unavailable" in tree) return tree;
    return new SessionQuotas(tree, settings);
  }

  /** The budget in bytes; 0: none. */
  get budgetBytes(): number {
    return mib(this.settings.sessionsMemoryMb);
  }

  /** Whether a new session fits in the sessions' memory budget beside those running. */
  fits(): boolean {
    return this.budgetBytes <= 0 || this.tree.memoryBytes() + NEW_SESSION_BYTES <= this.budgetBytes;
  }

  /** Memory all sessions use now, bytes. */
  memoryBytes(): number {
    return this.tree.memoryBytes();
  }

  /** CPU time all sessions used since the service started, seconds. */
  cpuSeconds(): number {
    return this.tree.cpuSeconds();
  }

  async session(id: string): Promise<SessionQuota> {
    const { sessionMemoryMb, sessionCpuCores, sessionProcesses } = this.settings;
    const group = await this.tree.session(id, {
      memoryBytes: mib(sessionMemoryMb),
      cpuCores: Math.max(0, sessionCpuCores),
      processes: Math.max(0, sessionProcesses),
    });
    return {
      group,
      place: async (pid) => {
        try {
          await group.add(pid);
          // Sessions go first when the host runs out of memory; what they start inherits it.
          await writeFile(`/proc/${pid}/oom_score_adj`, "1000");
        } catch (e) {
          // Killed between its fork and now: its end is noticed as any session's end is.
          if (!["ESRCH", "ENOENT"].includes((e as NodeJS.ErrnoException).code ?? "")) throw e;
        }
      },
      endedBy: () => {
        // A kill in this group counts for the budget's too: whose limit it was, the group's own count of
        // reaching its limit tells.
        const killed = group.oomKills() > 0;
        if (killed && group.reachedLimit()) return `R session ended: memory limit of ${sessionMemoryMb} MiB reached`;
        const kills = this.tree.budgetOomKills();
        if (killed || kills > this.budgetKills) {
          this.budgetKills = kills;
          return `R session ended: the R sessions' memory budget of ${this.settings.sessionsMemoryMb} MiB (r.sessionsMemoryMb) was reached`;
        }
        return undefined;
      },
    };
  }

  removeLeftovers(): string[] {
    return this.tree.removeLeftovers();
  }

  close(): Promise<void> {
    return this.tree.close();
  }
}

/**
 * The service out of the OOM killer's reach: -1000 needs CAP_SYS_RESOURCE, which a container may lack;
 * then sessions (+1000) are still its first choice. Answers whether the service is out of reach.
 */
export function protectFromOomKiller(): boolean {
  try {
    writeFileSync("/proc/self/oom_score_adj", "-1000");
    return true;
  } catch {
    return false;
  }
}

function mib(n: number): number {
  return n > 0 ? n * 1048576 : 0;
}
