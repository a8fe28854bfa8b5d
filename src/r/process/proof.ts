import { timingSafeEqual } from "node:crypto";
import { constants } from "node:fs";
import { open, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { PROOF_FILE } from "../wire/protocol-table.js";

/**
 * How an isolated session proves, on each of its connections, that it is the process forked for it.
 * Its token alone does not: the token reaches the session through the R server, so a later fork may
 * find it in the memory it inherits. The proof is a secret the session makes after its fork, as its
 * own uid, and writes in its home (0700, that uid's): no other session's process can read it, and no
 * process it was forked from ever held it. Node reads it back (as root) and compares. Asking the
 * kernel who owns the connection instead (/proc/net/tcp) costs a walk of the whole socket table, 4.7
 * ms of CPU per read on this machine's 262,144 buckets, on every session start.
 */

/** The proof file of a session whose working directory is `workDir` (its home is the folder above). */
export const proofFile = (workDir: string): string => join(dirname(workDir), PROOF_FILE);

/** 32 random bytes in hex, as worker.R writes them. */
const PROOF_LENGTH = 64;

/**
 * Whether `claimed` is what `file` holds, `file` being a regular file owned by `uid`. Opened without
 * following a link and without blocking (a FIFO the session put there), and read no further than a
 * proof's length: the session owns the folder and may have put anything at that name.
 */
export async function holdsProof(file: string, uid: number, claimed: string): Promise<boolean> {
  if (claimed.length !== PROOF_LENGTH) return false;
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const stat = await handle.stat();
    if (!stat.isFile() || stat.uid !== uid || stat.size !== PROOF_LENGTH) return false;
    const held = Buffer.alloc(PROOF_LENGTH);
    const { bytesRead } = await handle.read(held, 0, PROOF_LENGTH, 0);
    return bytesRead === PROOF_LENGTH && timingSafeEqual(held, Buffer.from(claimed, "latin1"));
  } catch {
    return false;
  } finally {
    await handle?.close();
  }
}

/** Removes a proof once both connections made it: the session's home is left as it was made. */
export function removeProof(file: string): Promise<void> {
  return unlink(file).catch(() => undefined);
}
