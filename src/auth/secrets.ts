import bcrypt from "bcryptjs";

/**
 * Stored secrets are `{bcrypt}$2…` (hashed), `{noop}text` or plain text; they are checked off the
 * event loop by HashPool (hash-worker.js).
 */
export async function hashSecret(secret: string): Promise<string> {
  return `{bcrypt}${await bcrypt.hash(secret, 10)}`;
}
