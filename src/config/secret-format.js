// @ts-check
/**
 * The stored forms of a password, parsed: what the `users` setting's secrets may be. One parser for the
 * configuration, which refuses at start a secret that could not be checked (a hash from another system
 * must never become a literal password), and for the hash worker (src/auth/hash-worker.js), which
 * checks one. Plain JavaScript because the worker runs without tsx.
 *
 * `{pbkdf2}` and `{scrypt}` are Spring Security's encodings (what Rock's DelegatingPasswordEncoder
 * reads): Pbkdf2PasswordEncoder() and SCryptPasswordEncoder() with their defaults.
 */

/**
 * @typedef {{ kind: "plain"; text: string }
 *   | { kind: "bcrypt"; hash: string }
 *   | { kind: "pbkdf2"; salt: Buffer; hash: Buffer }
 *   | { kind: "scrypt"; N: number; r: number; p: number; salt: Buffer; hash: Buffer }} StoredSecret
 */

const PREFIXES = ["{bcrypt}", "{pbkdf2}", "{scrypt}", "{noop}"];

/** Spring's Pbkdf2PasswordEncoder(): HMAC-SHA1, 185,000 iterations, hex of an 8-byte salt then a 32-byte hash. */
export const PBKDF2 = { digest: "sha1", iterations: 185_000, saltBytes: 8, hashBytes: 32 };

const BCRYPT = /^\$2[aby]\$(0[4-9]|[12]\d|3[01])\$[./A-Za-z0-9]{53}$/;
const HEX = /^(?:[0-9a-fA-F]{2})+$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** scrypt needs 128·N·r bytes: 64 MiB is Spring's newest default (N = 2^16, r = 8); more is refused. */
const SCRYPT_MAX_BYTES = 64 * 1024 * 1024;

/**
 * @param {string} secret
 * @returns {StoredSecret}
 * @throws {Error} when the secret has a `{…}` prefix this server cannot check, or a malformed body
 */
export function parseSecret(secret) {
  const prefix = /^\{([^}]*)\}/.exec(secret);
  if (!prefix) return { kind: "plain", text: secret };
  const body = secret.slice(prefix[0].length);
  switch (prefix[1]) {
    case "noop":
      return { kind: "plain", text: body };
    case "bcrypt":
      if (!BCRYPT.test(body)) throw new Error("{bcrypt} must be followed by a bcrypt hash ($2a$, $2b$ or $2y$, its cost, 53 characters)");
      return { kind: "bcrypt", hash: body };
    case "pbkdf2":
      return pbkdf2(body);
    case "scrypt":
      return scrypt(body);
    default:
      throw new Error(`unsupported secret prefix '${prefix[0]}'; supported: ${PREFIXES.join(", ")}, or plain text (write a plain text that starts with '{' as {noop}…)`);
  }
}

/**
 * @param {string} body
 * @returns {StoredSecret}
 */
function pbkdf2(body) {
  if (!HEX.test(body) || body.length !== 2 * (PBKDF2.saltBytes + PBKDF2.hashBytes)) {
    throw new Error(`{pbkdf2} must be followed by ${2 * (PBKDF2.saltBytes + PBKDF2.hashBytes)} hex digits (Spring's Pbkdf2PasswordEncoder defaults)`);
  }
  const bytes = Buffer.from(body, "hex");
  return { kind: "pbkdf2", salt: bytes.subarray(0, PBKDF2.saltBytes), hash: bytes.subarray(PBKDF2.saltBytes) };
}

/**
 * `$` hex(log2 N << 16 | r << 8 | p) `$` base64 salt `$` base64 hash.
 * @param {string} body
 * @returns {StoredSecret}
 */
function scrypt(body) {
  const parts = body.split("$");
  const [empty, params, salt, hash] = parts;
  if (parts.length !== 4 || empty !== "" || !/^[0-9a-f]{1,8}$/i.test(params ?? "") || !BASE64.test(salt ?? "") || !BASE64.test(hash ?? "")) {
    throw new Error("{scrypt} must be followed by $<hex parameters>$<base64 salt>$<base64 hash> (Spring's SCryptPasswordEncoder)");
  }
  const packed = Number.parseInt(/** @type {string} */ (params), 16);
  const N = 2 ** ((packed >>> 16) & 0xffff);
  const r = (packed >>> 8) & 0xff;
  const p = packed & 0xff;
  const saltBytes = Buffer.from(/** @type {string} */ (salt), "base64");
  const hashBytes = Buffer.from(/** @type {string} */ (hash), "base64");
  if (N < 2 || r < 1 || p < 1 || 128 * N * r > SCRYPT_MAX_BYTES || saltBytes.length === 0 || hashBytes.length < 16) {
    throw new Error(`{scrypt} parameters out of range (N = ${N}, r = ${r}, p = ${p}; 128·N·r must stay within 64 MiB, the hash at least 16 bytes)`);
  }
  return { kind: "scrypt", N, r, p, salt: saltBytes, hash: hashBytes };
}
