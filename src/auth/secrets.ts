import bcrypt from "bcryptjs";

/**
 * The stored form this server writes (bootstrap, `rock-ts hash-password`): bcrypt of cost 10, the
 * cost of the decoy every check pays at least (hash-worker.js). Other forms it reads are in
 * src/config/secret-format.js.
 */
export async function hashSecret(secret: string): Promise<string> {
  return `{bcrypt}${await bcrypt.hash(secret, 10)}`;
}
