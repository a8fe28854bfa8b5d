import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

let lockDir: string | undefined;

/**
 * The folder where this run's servers lock their uid blocks (r.lockDir, ROCK_R_LOCK_DIR), shared by
 * all of them as a host's servers share /run/rock-ts: a temporary folder, so that neither a real
 * server's locks nor the files killed servers leave are touched; removed by removeTestLockDir().
 */
export function testLockDir(): string {
  return (lockDir ??= mkdtempSync(join(tmpdir(), "rock-test-locks-")));
}

/** Removes this run's lock folder (mocha's root afterAll, once every server ended). */
export function removeTestLockDir(): void {
  if (lockDir) rmSync(lockDir, { recursive: true, force: true });
  lockDir = undefined;
}
