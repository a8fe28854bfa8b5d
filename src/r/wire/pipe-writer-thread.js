// @ts-check
/**
 * A PipeWriter's thread (pipe-writer.ts): writes spans of a shared ring into a session's value pipe
 * through a blocking descriptor, so the kernel wakes it as soon as R has read. Plain JavaScript because
 * worker threads do not inherit tsx's loader (tsx issue #354).
 *
 * Its first message is the descriptor, the ring and the stop flag; each next one a span of the ring to
 * write whole, acknowledged by its length once written (or skipped: the flag is set).
 */
import { writeSync } from "node:fs";
import { parentPort } from "node:worker_threads";

let fd = -1;
let ring = new Uint8Array(new SharedArrayBuffer(0));
let stop = new Int32Array(new SharedArrayBuffer(4));

/**
 * @param {{ fd: number, ring: SharedArrayBuffer, stop: SharedArrayBuffer } | { start: number, length: number }} m
 */
function onMessage(m) {
  if ("fd" in m) {
    fd = m.fd;
    ring = new Uint8Array(m.ring);
    stop = new Int32Array(m.stop);
    return;
  }
  /** @type {string | undefined} */
  let error;
  try {
    for (let at = m.start, end = m.start + m.length; at < end && Atomics.load(stop, 0) === 0; ) at += writeSync(fd, ring, at, end - at);
  } catch (e) {
    error = e instanceof Error ? e.message : String(e);
  }
  parentPort?.postMessage({ length: m.length, error });
}

parentPort?.on("message", onMessage);
