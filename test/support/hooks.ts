/**
 * Mocha's root hooks (.mocharc.json "require"): whatever a failed test left running is ended, so that a
 * run whose servers could not start still exits.
 */
import { openCgroupTree } from "../../src/r/confine/cgroups.js";
import { killSpawnedRocks } from "./rock-process.js";
import { handedOutBlocks, removeTestLockDir } from "./uids.js";

// The R processes tests start themselves (to compute what the server's R must answer) get the locale the
// service gives its R when the environment sets none (src/r/confine/environment.ts): C.UTF-8, so that
// both write the same native encoding into R serialization's header.
if (!process.env.LC_ALL && !process.env.LC_CTYPE && !process.env.LANG) process.env.LANG = "C.UTF-8";

export const mochaHooks = {
  async afterAll(): Promise<void> {
    await killSpawnedRocks();
    removeTestLockDir();
    // A server killed before it closed (as the cluster tests kill nodes) leaves its sessions' control
    // groups: the kernel's objects, outside any temporary folder, which would pile up run after run.
    if (process.getuid?.() !== 0) return;
    for (const block of handedOutBlocks()) {
      const tree = openCgroupTree(`rock-sessions-${block}`, 0);
      if (!("unavailable" in tree)) await tree.close();
    }
  },
};
