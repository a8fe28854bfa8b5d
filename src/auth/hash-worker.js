// @ts-check
/**
 * A HashPool worker: checks one presented password against one stored secret at a time, so that
 * bcrypt's deliberate slowness is paid off the event loop. Plain JavaScript because worker threads do
 * not inherit tsx's loader (tsx issue #354).
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { parentPort } from "node:worker_threads";
import bcrypt from "bcryptjs";

/** A well-formed bcrypt hash (cost 10, as bootstrap creates) that no known password matches. */
const DECOY = "$2b$10$DVvE5haT7og8pbyI6tAvfOZM.p3m0oaKoolo6b39SuDeYun2Feuxb";
/** `$2b$10$` and the 22-character salt: what bcrypt needs to hash a candidate the same way. */
const SETTINGS_LENGTH = 29;

/**
 * Every check costs one bcrypt computation whatever is stored: unknown users (`stored` null) and
 * plain-text secrets pay one against the decoy, so that timing tells neither which names exist nor
 * how their secrets are kept.
 * @param {string | null} stored `{bcrypt}hash`, `{noop}text` or plain text; null for an unknown user
 * @param {string} presented
 * @returns {boolean}
 */
function verify(stored, presented) {
  if (stored?.startsWith("{bcrypt}")) return bcryptMatches(stored.slice("{bcrypt}".length), presented);
  bcryptMatches(DECOY, presented);
  if (stored === null) return false;
  const plain = stored.startsWith("{noop}") ? stored.slice("{noop}".length) : stored;
  // Digests have the same length whatever the texts', as timingSafeEqual requires.
  return timingSafeEqual(sha256(plain), sha256(presented));
}

/**
 * @param {string} hash
 * @param {string} presented
 */
function bcryptMatches(hash, presented) {
  const candidate = Buffer.from(bcrypt.hashSync(presented, hash.slice(0, SETTINGS_LENGTH)));
  const expected = Buffer.from(hash);
  return candidate.length === expected.length && timingSafeEqual(candidate, expected);
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
