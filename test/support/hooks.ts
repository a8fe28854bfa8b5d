/**
 * Mocha's root hooks (.mocharc.json "require"): whatever a failed test left running is ended, so that a
 * run whose servers could not start still exits.
 */
import { killSpawnedRocks } from "./rock-process.js";

export const mochaHooks = {
  async afterAll(): Promise<void> {
    await killSpawnedRocks();
  },
};
