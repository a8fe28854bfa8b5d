import type { UidRange } from "../../src/config/config.js";

/**
 * A block of session uids of its own for each engine a test starts: engines sharing uids would end
 * each other's processes (several test runs may share the machine, too).
 */
export function testSessionUids(): UidRange {
  const first = 100_000 + Math.floor(Math.random() * 40_000) * 100;
  handedOut.add(`${first}-${first + 99}`);
  return { first, last: first + 99 };
}

const handedOut = new Set<string>();

/** The blocks handed out in this run: the control groups a killed server left for one are removed at its end. */
export function handedOutBlocks(): readonly string[] {
  return [...handedOut];
}

/** A block as ROCK_R_SESSION_UIDS writes it, for a server in a process of its own. */
export function uidsVariable({ first, last }: UidRange): string {
  return `${first}-${last}`;
}
