import { join } from "node:path";
import { lockFile } from "../r/confine/file-lock.js";

/**
 * One server per data folder: `<dataDir>/.lock` (0600) is held from right after the folder is made
 * (before users, the catalogue or anything else in it is touched) to the service's close, and the kernel
 * lets go of it when the service dies (file-lock.ts). A second server given the folder is refused at
 * once, naming the holder's pid, rather than by LevelDB's lock half-way through its start. Answers the
 * release.
 */
export async function lockDataFolder(dataDir: string): Promise<() => void> {
  const lock = await lockFile(join(dataDir, ".lock"), 0o600);
  if ("heldBy" in lock) {
    throw new Error(
      `The data folder ${dataDir} (dataDir, ROCK_DATA_DIR) is in use by another rock-ts server, pid ${lock.heldBy ?? "unknown"}: give this one a folder of its own`,
    );
  }
  return () => lock.release();
}
