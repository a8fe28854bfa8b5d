import { readdirSync, readFileSync } from "node:fs";

/** One process as /proc tells it: enough for tests to find what a server left behind. */
export interface ProcStat {
  readonly pid: number;
  readonly ppid: number;
  readonly pgrp: number;
  readonly uid: number;
  readonly zombie: boolean;
}

/** Every process on the machine now (those that exit meanwhile are skipped). */
export function processes(): ProcStat[] {
  const out: ProcStat[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${name}/status`, "utf8"))?.[1] ?? -1);
      out.push({ pid: Number(name), ppid: Number(fields[1]), pgrp: Number(fields[2]), uid, zombie: fields[0] === "Z" });
    } catch {
      // exited meanwhile
    }
  }
  return out;
}
