/** What a hierarchy of control groups gives the engine: a group per session inside one of its own. */
export interface SessionLimits {
  /** Memory with swap, bytes; 0: none. */
  readonly memoryBytes: number;
  /** CPU time per second of wall time, in cores; 0: no cap (the weight alone shares it). */
  readonly cpuCores: number;
  /** Processes (and threads) at once; 0: none. */
  readonly processes: number;
}

export interface SessionGroup {
  /**
   * Moves a process (and so what it starts later) into the group. Asynchronous: the kernel's move
   * waits for RCU and took 9–24 ms here (BENCH_ONLY=suspend, "placing it in its cgroup"), which on the
   * event loop stalled every call of every session, 20–35 ms at a time (by hand), at each spare's fork.
   */
  add(pid: number): Promise<void>;
  /** Times the kernel's OOM killer ended a process of this group (for its limit or a parent's). */
  oomKills(): number;
  /** Whether the group's memory ever reached its own limit (not a parent's). */
  reachedLimit(): boolean;
  /** Memory the group uses now, bytes. */
  memoryBytes(): number;
  /** CPU time the group used, seconds. */
  cpuSeconds(): number;
  /** SIGKILL to every process in the group (a process forking meanwhile may leave a child: kill again until `empty`). */
  kill(): void;
  /** Whether no live process is left in the group (zombies are not listed). */
  empty(): boolean;
  /** Removes the group once its processes are gone (a group still holding one is left, and said); whether it went. */
  remove(): Promise<boolean>;
}

/** The engine's group, holding one group per session. */
export interface CgroupTree {
  /** Which cgroup hierarchy: 1 or 2. */
  readonly version: 1 | 2;
  /** A new group for a session, with its limits set (its folders made off the event loop: a session starts while others run). */
  session(name: string, limits: SessionLimits): Promise<SessionGroup>;
  /** Times the budget's OOM killer ended a session process because all sessions together took too much. */
  budgetOomKills(): number;
  /** Memory all sessions use now, bytes. */
  memoryBytes(): number;
  /** CPU time all sessions used (those ended included), seconds. */
  cpuSeconds(): number;
  /** Removes session groups a crashed run left (their processes already ended); what stays is said. */
  removeLeftovers(): string[];
  /** Removes the engine's own groups (at close, once every session ended). */
  close(): Promise<void>;
}

export type CgroupsUnavailable = { readonly unavailable: string };
