import { createHash, timingSafeEqual } from "node:crypto";
import bcrypt from "bcryptjs";

/**
 * Stored secrets are `{bcrypt}$2…` (hashed), `{noop}text` or plain text. Digests are compared rather
 * than the texts so that the comparison takes the same time whatever the lengths.
 */
export async function verifySecret(stored: string, presented: string): Promise<boolean> {
  if (stored.startsWith("{bcrypt}")) return bcrypt.compare(presented, stored.slice("{bcrypt}".length));
  const plain = stored.startsWith("{noop}") ? stored.slice("{noop}".length) : stored;
  return timingSafeEqual(sha256(plain), sha256(presented));
}

export async function hashSecret(secret: string): Promise<string> {
  return `{bcrypt}${await bcrypt.hash(secret, 10)}`;
}

export function sha256(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}
