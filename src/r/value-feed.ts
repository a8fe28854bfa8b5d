import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { close, constants, fstat, open as openFd } from "node:fs";
import { open, rm, type FileHandle } from "node:fs/promises";
import { promisify } from "node:util";
import { Socket } from "node:net";
import { join } from "node:path";
import { runAs, type Owner } from "./confine/as-owner.js";

/** Where a value's pipe and spool go: a session's home, and who owns it while the session has a process. */
export interface FeedDirs {
  readonly home: string;
  readonly owner?: Owner;
}

/** Read size when a spooled part is fed to R: a few reads for what came while R was busy. */
const SPOOL_READ_BYTES = 1024 * 1024;

/**
 * Bytes gathered before one write: a pipe holds 64 KiB, and each write into it wakes R. Written as
 * they came (48 KiB decoded from a 64 KiB chunk of base64), Node spent twice the CPU on the pipe that
 * 256 KiB writes cost (72 against 36 ms for 80 MB read by R's unserialize, measured by hand; the
 * whole assign is BENCH_ONLY=assign's).
 */
const WRITE_BYTES = 256 * 1024;

/**
 * The FIFO's name in a session's folder (its home, above the working folder the file calls reach). It
 * is made by the first streamed assign of the session and kept for the next: making it takes a
 * process (Node has no mkfifo), ~5 ms of the event loop's time per assign (a CPU profile, by hand).
 */
const PIPE_NAME = ".assign-pipe";

/** Makes the FIFO R reads, as the session's uid when it has one (its folder is its own). */
function makeFifo(path: string, owner: Owner | undefined): Promise<void> {
  const args = ["-m", "600", "--", path];
  if (owner) return runAs(owner, "mkfifo", args);
  return new Promise((resolve, reject) => execFile("mkfifo", args, (error) => (error ? reject(error) : resolve())));
}

/**
 * Opens the FIFO for writing without waiting for R (Linux lets O_RDWR open a FIFO at once), as a
 * non-blocking pipe the event loop writes to. The session owns the folder and could swap the name for
 * a symlink or another file after mkfifo: the last name is not followed, and what was opened must be
 * a FIFO of the session's own uid, or nothing is written to it.
 */
async function openFifo(path: string, owner: Owner | undefined): Promise<Socket> {
  // A bare descriptor, not a FileHandle: the socket owns it from here (a FileHandle closes its
  // descriptor when it is collected, under the socket).
  const fd = await promisify(openFd)(path, constants.O_RDWR | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  try {
    const file = await promisify(fstat)(fd);
    if (!file.isFIFO() || file.uid !== (owner?.uid ?? process.getuid?.() ?? 0)) throw new Error("the pipe to the session was replaced");
  } catch (error) {
    close(fd, () => undefined);
    throw error;
  }
  return new Socket({ fd, readable: false, writable: true });
}

/** Resolves once `pipe` took `bytes` or is closed (R stopped reading): at most one write waits in Node. */
function writeTo(pipe: Socket, bytes: Uint8Array): Promise<void> | undefined {
  if (pipe.destroyed || pipe.write(bytes)) return undefined;
  return new Promise((resolve) => {
    const done = (): void => {
      pipe.off("drain", done);
      pipe.off("close", done);
      resolve();
    };
    pipe.on("drain", done);
    pipe.on("close", done);
  });
}

/**
 * An R serialization on its way from a request into a session, which unserializes it as it arrives
 * (issue 30): R reads a FIFO in the session's folder (`unserialize()` on a file connection) that Node
 * writes the bytes into as they are received, so neither side holds the whole body and R's work
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
  private pipe: Socket | undefined;
  /** The body is whole. */
  private ended = false;
  /** No more bytes are wanted: R answered, or the assign was given up. */
  private closed = false;
  /** Why a step failed: the ones after it fail too. */
  private failure: Error | undefined;

  /** `dirs`: the session's folders as they are now, where the spool goes (its process may not run yet). */
  constructor(private readonly dirs: () => FeedDirs) {}

  /** Takes the next bytes of the serialization; resolves when R, or the spool, took them. */
  async write(bytes: Uint8Array): Promise<void> {
    this.bytes += bytes.length;
    this.gathered.push(bytes);
    this.gatheredBytes += bytes.length;
    if (this.gatheredBytes >= WRITE_BYTES) await this.flush();
  }

  private flush(): Promise<void> {
    const bytes = this.gathered.length === 1 ? this.gathered[0]! : Buffer.concat(this.gathered);
    this.gathered = [];
    this.gatheredBytes = 0;
    return this.inTurn(async () => {
      if (this.closed) return;
      if (this.pipe) return writeTo(this.pipe, bytes);
      await this.toSpool(bytes);
    });
  }

  /** The body is whole: R reads to its end, then the end of the pipe. */
  async end(): Promise<void> {
    if (this.gatheredBytes > 0) await this.flush();
    return this.inTurn(async () => {
      this.ended = true;
      if (this.pipe) await this.endPipe(this.pipe);
    });
  }

  /**
   * The session's turn: makes the FIFO in its folder as its process owns it and gives its path, for R
   * to open. What was spooled goes first; R must be reading, so this does not wait for it.
   */
  async open(dirs: FeedDirs): Promise<string> {
    if (this.closed) throw new Error("the value stopped coming before the session read it");
    const path = join(dirs.home, PIPE_NAME);
    const pipe = await openFifo(path, dirs.owner).catch(async () => {
      // Not made yet, or the session put something else at its name: made anew.
      await rm(path, { force: true, recursive: true });
      await makeFifo(path, dirs.owner);
      return openFifo(path, dirs.owner);
    });
    // A pipe R closed answers EPIPE to the next write: R has answered (or failed), which says why.
    pipe.on("error", () => pipe.destroy());
    this.inTurn(async () => {
      if (this.closed) return void pipe.destroy();
      this.pipe = pipe;
      await this.feedSpool(pipe);
      if (this.ended) await this.endPipe(pipe);
    }).catch(() => pipe.destroy());
    return path;
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

  private async feedSpool(pipe: Socket): Promise<void> {
    const spool = this.spool;
    if (!spool) return;
    for (let at = 0; at < spool.size && !pipe.destroyed; ) {
      const piece = Buffer.allocUnsafe(Math.min(SPOOL_READ_BYTES, spool.size - at));
      const { bytesRead } = await spool.handle.read(piece, 0, piece.length, at);
      if (bytesRead === 0) break;
      at += bytesRead;
      await writeTo(pipe, piece.subarray(0, bytesRead));
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

  /** All written, then the pipe closed: R reads the end of the bytes (a truncated value fails there). */
  private async endPipe(pipe: Socket): Promise<void> {
    if (!pipe.destroyed) await new Promise<void>((resolve) => pipe.end(resolve));
    pipe.destroy();
  }
}
