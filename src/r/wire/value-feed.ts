import { randomBytes } from "node:crypto";
import { open, rm, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { PipeWriter } from "./pipe-writer.js";
import { makeValuePipe, valuePipePath, type PipeDirs } from "./value-pipe.js";

/** Read size when a spooled part is fed to R: a few reads for what came while R was busy. */
const SPOOL_READ_BYTES = 1024 * 1024;

/**
 * Bytes gathered before they are handed on: one message to the pipe's writing thread (pipe-writer.ts),
 * or one write of the spool. Handed on as they came (48 KiB decoded from a 64 KiB chunk of base64),
 * the writes cost Node twice the CPU (measured by hand with the event loop writing into the pipe, 72
 * against 36 ms for 80 MB; the whole assign is BENCH_ONLY=assign's).
 */
const WRITE_BYTES = 256 * 1024;

/**
 * An R serialization on its way from a request into a session, which unserializes it as it arrives
 * (issue 30): R reads the session's value pipe (value-pipe.ts; `unserialize()` on a file connection)
 * that Node writes the bytes into as they are received, so neither side holds the whole body and R's work
 * overlaps the transfer. Until the session's turn comes (it runs something else, or resumes) the bytes
 * are spooled to a file beside it, which is fed to R first. Bytes go out in the order they came: every
 * operation runs after the one before. A client that stops sending closes the pipe: R's read then
 * fails and the session is left as it was.
 */
export class ValueFeed {
  /** Bytes received. */
  bytes = 0;
  private chain: Promise<void> = Promise.resolve();
  /** Bytes not written yet, fewer than WRITE_BYTES. */
  private gathered: Uint8Array[] = [];
  private gatheredBytes = 0;
  private readonly spoolName = `.assign-${randomBytes(8).toString("hex")}.spool`;
  private spool: { readonly path: string; readonly handle: FileHandle; size: number } | undefined;
  private pipe: PipeWriter | undefined;
  /** The body is whole. */
  private ended = false;
  /** No more bytes are wanted: R answered, or the assign was given up. */
  private closed = false;
  /** Why a step failed: the ones after it fail too. */
  private failure: Error | undefined;

  /** `dirs`: the session's folders as they are now, where the spool goes (its process may not run yet). */
  constructor(private readonly dirs: () => PipeDirs) {}

  /** Takes the next bytes of the serialization; resolves when R, or the spool, took them. */
  async write(bytes: Uint8Array): Promise<void> {
    this.bytes += bytes.length;
    this.gathered.push(bytes);
    this.gatheredBytes += bytes.length;
    if (this.gatheredBytes >= WRITE_BYTES) await this.flush();
  }

  private flush(): Promise<void> {
    const pieces = this.gathered;
    this.gathered = [];
    this.gatheredBytes = 0;
    return this.inTurn(async () => {
      if (this.closed) return;
      if (this.pipe) return this.pipe.write(pieces);
      await this.toSpool(pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces));
    });
  }

  /** The body is whole: R reads to its end, then the end of the pipe. */
  async end(): Promise<void> {
    if (this.gatheredBytes > 0) await this.flush();
    return this.inTurn(async () => {
      this.ended = true;
      if (this.pipe) await this.pipe.end();
    });
  }

  /**
   * The session's turn: makes the FIFO in its folder as its process owns it and gives its path, for R
   * to open. What was spooled goes first; R must be reading, so this does not wait for it.
   */
  async open(dirs: PipeDirs): Promise<string> {
    if (this.closed) throw new Error("the value stopped coming before the session read it");
    const pipe = await PipeWriter.open(dirs).catch(async () => {
      // Not made yet, or the session put something else at its name: made anew.
      await makeValuePipe(dirs);
      return PipeWriter.open(dirs);
    });
    this.inTurn(async () => {
      if (this.closed) return pipe.destroy();
      this.pipe = pipe;
      await this.feedSpool(pipe);
      if (this.ended) await pipe.end();
    }).catch(() => pipe.destroy());
    return valuePipePath(dirs);
  }

  /**
   * No more bytes are wanted (R answered, the client left, the body was refused): the pipe is closed
   * at once, so a read R waits in fails, and the files go.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.pipe?.destroy();
    await this.chain;
    this.pipe?.destroy();
    await this.dropSpool();
  }

  /**
   * Runs `step` after every step before it. A step that failed (the spool's disk) fails every one
   * after it: the body's next write then gives the assign up.
   */
  private inTurn(step: () => Promise<void>): Promise<void> {
    const next = this.chain.then(() => {
      if (this.failure) throw this.failure;
      return step();
    });
    this.chain = next.catch((error: unknown) => {
      this.failure ??= error instanceof Error ? error : new Error(String(error));
    });
    return next;
  }

  private async toSpool(bytes: Uint8Array): Promise<void> {
    if (!this.spool) {
      const { home, owner } = this.dirs();
      const path = join(home, this.spoolName);
      const handle = await open(path, "wx+", 0o600);
      this.spool = { path, handle, size: 0 };
      if (owner) await handle.chown(owner.uid, owner.gid);
    }
    const spool = this.spool;
    await spool.handle.write(bytes, 0, bytes.length, spool.size);
    spool.size += bytes.length;
  }

  private async feedSpool(pipe: PipeWriter): Promise<void> {
    const spool = this.spool;
    if (!spool) return;
    for (let at = 0; at < spool.size && !this.closed; ) {
      const piece = Buffer.allocUnsafe(Math.min(SPOOL_READ_BYTES, spool.size - at));
      const { bytesRead } = await spool.handle.read(piece, 0, piece.length, at);
      if (bytesRead === 0) break;
      at += bytesRead;
      await pipe.write([piece.subarray(0, bytesRead)]);
    }
    await this.dropSpool();
  }

  private async dropSpool(): Promise<void> {
    const spool = this.spool;
    if (!spool) return;
    this.spool = undefined;
    await spool.handle.close().catch(() => undefined);
    await rm(spool.path, { force: true }).catch(() => undefined);
  }
}
