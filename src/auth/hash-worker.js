// @ts-check
/**
 * A HashPool worker: checks one presented password against one stored secret at a time, so that
 * bcrypt's deliberate slowness is paid off the event loop. Plain JavaScript because worker threads do
 * not inherit tsx's loader (tsx issue #354).
 */
import { createHash, pbkdf2Sync, scryptSync, timingSafeEqual } from "node:crypto";
import { parentPort } from "node:worker_threads";
import bcrypt from "bcryptjs";
import { PBKDF2, parseSecret } from "../config/secret-format.js";

/** A well-formed bcrypt hash (cost 10, as bootstrap creates) that no known password matches. */
const DECOY = "$2b$10$DVvE5haT7og8pbyI6tAvfOZM.p3m0oaKoolo6b39SuDeYun2Feuxb";
/** `$2b$10$` and the 22-character salt: what bcrypt needs to hash a candidate the same way. */
const SETTINGS_LENGTH = 29;

/** How long this thread's last decoy took: the floor of a check by another algorithm. */
let decoyMs = 0;
const pause = new Int32Array(new SharedArrayBuffer(4));

/** @typedef {import("../config/secret-format.js").StoredSecret} StoredSecret */

/**
 * Every check costs at least one slow hash whatever is stored: unknown users (`stored` null) and
 * plain-text secrets pay one against the decoy, and a hash of another kind or cost is never answered
 * sooner than a decoy (Spring's scrypt defaults take about half a bcrypt of cost 10), so that timing
 * tells neither which names exist nor how their secrets are kept.
 * @param {string | null} stored a secret as src/config/secret-format.js reads it; null for an unknown user
 * @param {string} presented
 * @returns {boolean}
 */
function verify(stored, presented) {
  const secret = stored === null ? null : parseSecret(stored);
  if (secret === null || secret.kind === "plain") {
    decoy(presented);
    // Digests have the same length whatever the texts', as timingSafeEqual requires.
    return secret !== null && equal(sha256(secret.text), sha256(presented));
  }
  return notFasterThanDecoy(() => hashMatches(secret, presented));
}

/**
 * @param {Exclude<StoredSecret, { kind: "plain" }>} secret
 * @param {string} presented
 */
function hashMatches(secret, presented) {
  switch (secret.kind) {
    case "bcrypt":
      return bcryptMatches(secret.hash, presented);
    case "pbkdf2":
      return equal(pbkdf2Sync(presented, secret.salt, PBKDF2.iterations, secret.hash.length, PBKDF2.digest), secret.hash);
    case "scrypt": {
      const { N, r, p } = secret;
      // node:crypto refuses more than 32 MiB of work memory unless allowed; the parser bounds 128·N·r.
      return equal(scryptSync(presented, secret.salt, secret.hash.length, { N, r, p, maxmem: 2 * 128 * N * r }), secret.hash);
    }
  }
}

/** @param {string} presented */
function decoy(presented) {
  const started = performance.now();
  bcryptMatches(DECOY, presented);
  decoyMs = performance.now() - started;
}

/**
 * Runs `check`, then waits out what is left of a decoy's time (measured once in this thread first).
 * @param {() => boolean} check
 */
function notFasterThanDecoy(check) {
  if (decoyMs === 0) decoy("");
  const started = performance.now();
  const ok = check();
  const left = decoyMs - (performance.now() - started);
  if (left > 0) Atomics.wait(pause, 0, 0, left);
  return ok;
}

/**
 * @param {string} hash
 * @param {string} presented
 */
function bcryptMatches(hash, presented) {
  return equal(Buffer.from(bcrypt.hashSync(presented, hash.slice(0, SETTINGS_LENGTH))), Buffer.from(hash));
}

/**
 * @param {Buffer} a
 * @param {Buffer} b
 */
function equal(a, b) {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** @param {string} text */
function sha256(text) {
  return createHash("sha256").update(text, "utf8").digest();
}

const port = parentPort;
if (!port) throw new Error("hash-worker.js runs in a worker thread");
port.on("message", (/** @type {{ stored: string | null; presented: string }} */ task) => {
  try {
    port.postMessage({ ok: verify(task.stored, task.presented) });
  } catch (e) {
    port.postMessage({ error: e instanceof Error ? e.message : String(e) });
  }
});
