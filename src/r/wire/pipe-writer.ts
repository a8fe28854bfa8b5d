import { close, constants, open as openFd } from "node:fs";
import { Socket } from "node:net";
import { promisify } from "node:util";
import { Worker } from "node:worker_threads";
import { openValuePipe, type PipeDirs } from "./value-pipe.js";

/** The thread that writes into a value pipe (its protocol is told there). */
const THREAD_URL = new URL("./pipe-writer-thread.js", import.meta.url);

interface Written {
  readonly length: number;
  readonly error?: string;
}

/** Threads not writing for anyone, kept for the next assigns: a thread's start takes ~25 ms (by hand). */
const idle: Worker[] = [];
const MAX_IDLE = 2;

function takeThread(): Worker {
  const thread = idle.pop() ?? new Worker(THREAD_URL);
  // An idle thread does not keep the process alive.
  thread.unref();
  return thread;
}

/** `healthy`: it did not fail (a thread that threw is ended, not kept). */
function giveBack(thread: Worker, healthy: boolean): void {
  thread.removeAllListeners("message");
  thread.removeAllListeners("error");
  if (healthy && idle.length < MAX_IDLE) idle.push(thread);
  else void thread.terminate();
}

/**
 * The ring the bytes wait in for the thread, shared with it: copied in, they make no garbage for the
 * thread's heap (handed over as buffers of their own, they piled up there until its next collection,
 * which a thread that allocates nothing hardly ever runs: ~100 MB more at the peak of one assign).
 */
const RING_BYTES = 2 * 1024 * 1024;

/**
 * Writes a value into a session's value pipe from a thread of its own, which blocks in the kernel
 * until R has read: R's reads of the 64 KiB pipe then never wait for Node's event loop, busy with the
 * request's socket and its base64 (issue 30: the assign of BENCH_ONLY=assign took ~20% less than
 * with the event loop writing, measured by hand with a bare node:http server, 0.28 against 0.36 s).
 * A thread of its own, not libuv's pool: an R that stops reading (stopped by its own processes) would
 * otherwise hold one of the four threads every file operation and LevelDB share.
 *
 * The pipe stays open here for reading too (the descriptor it was checked on), so a write never fails
 * for want of a reader; a writer given up reads the rest of what is in flight and drops it, which
 * ends a write blocked on an R that stopped reading.
 */
export class PipeWriter {
  private readonly ring = new Uint8Array(new SharedArrayBuffer(RING_BYTES));
  /** Where the next bytes go in the ring. */
  private head = 0;
  /** Bytes in the ring not written yet. */
  private inFlight = 0;
  /** Called once the thread wrote some. */
  private whenWritten: Array<() => void> = [];
  private readonly stop = new Int32Array(new SharedArrayBuffer(4));
  private failure: string | undefined;
  private threadFailed = false;
  private closed = false;

  private constructor(
    /** Non-blocking, read and write: the descriptor checked to be the session's FIFO. */
    private readonly checked: number,
    /** Blocking, write only: the same pipe, which the thread writes into. */
    private readonly blocking: number,
    private readonly thread: Worker,
  ) {
    thread.on("message", (written: Written) => this.written(written));
    thread.on("error", (error) => {
      this.threadFailed = true;
      this.written({ length: this.inFlight, error: error.message });
    });
    thread.postMessage({ fd: blocking, ring: this.ring.buffer, stop: this.stop.buffer });
  }

  /** Opens the session's value pipe (see openValuePipe) and a thread to write into it. */
  static async open(dirs: PipeDirs): Promise<PipeWriter> {
    const checked = await openValuePipe(dirs, "write");
    try {
      // The pipe that was checked, opened again: not its name, which the session could swap meanwhile.
      const blocking = await promisify(openFd)(`/proc/self/fd/${checked}`, constants.O_WRONLY);
      return new PipeWriter(checked, blocking, takeThread());
    } catch (error) {
      close(checked, () => undefined);
      throw error;
    }
  }

  /**
   * Copies `pieces` into the ring for the thread, handed to it in spans as long as the ring allows
   * (each a message, which wakes the thread); resolves once they all are in (waiting while it is full).
   */
  async write(pieces: readonly Uint8Array[]): Promise<void> {
    let start = this.head;
    let span = 0;
    const post = (): void => {
      if (span === 0) return;
      this.thread.postMessage({ start, length: span });
      this.inFlight += span;
      span = 0;
      start = this.head;
    };
    for (const bytes of pieces) {
      for (let at = 0; at < bytes.length && !this.closed && !this.failure; ) {
        const room = Math.min(RING_BYTES - this.inFlight - span, RING_BYTES - this.head, bytes.length - at);
        if (room === 0) {
          post();
          if (this.inFlight === RING_BYTES) await this.someWritten();
          continue;
        }
        this.ring.set(bytes.subarray(at, at + room), this.head);
        span += room;
        this.head = (this.head + room) % RING_BYTES;
        at += room;
        if (this.head === 0) post();
      }
    }
    if (!this.closed) post();
  }

  /** Everything written, then the pipe closed: R reads the end of the bytes (a truncated value fails there). */
  async end(): Promise<void> {
    while (this.inFlight > 0 && !this.closed) await this.someWritten();
    this.destroy();
  }

  /** No more bytes: what is in flight is read back and dropped (so a blocked write ends), then all is closed. */
  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    Atomics.store(this.stop, 0, 1);
    if (this.inFlight === 0) return this.finish();
    const drain = new Socket({ fd: this.checked, readable: true, writable: false });
    drain.on("error", () => drain.destroy());
    drain.resume();
    const done = (): void => {
      if (this.inFlight > 0) return void this.whenWritten.push(done);
      drain.destroy();
      this.finish(false);
    };
    this.whenWritten.push(done);
  }

  /** Resolves once the thread wrote some bytes. */
  private someWritten(): Promise<void> {
    return new Promise((resolve) => this.whenWritten.push(resolve));
  }

  private written({ length, error }: Written): void {
    this.inFlight = Math.max(0, this.inFlight - length);
    if (error) this.failure ??= error;
    for (const call of this.whenWritten.splice(0)) call();
  }

  /** Closes the descriptors (the checked one unless a drain socket owns it) and gives the thread back. */
  private finish(closeChecked = true): void {
    close(this.blocking, () => undefined);
    if (closeChecked) close(this.checked, () => undefined);
    giveBack(this.thread, !this.threadFailed);
  }
}
