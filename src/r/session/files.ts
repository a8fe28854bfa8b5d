import { randomBytes } from "node:crypto";
import { constants, createWriteStream, fchownSync, type Stats, type WriteStream } from "node:fs";
import { lstat, mkdir, open, readlink, realpath, rename, rm, stat, type FileHandle } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { finished } from "node:stream/promises";
import { runAs, type Owner } from "../confine/as-owner.js";
import { badPath } from "./faults.js";
import type { SessionDirs } from "./home.js";

/** The folders a download reads from. */
type DownloadDirs = Pick<SessionDirs, "home" | "work" | "tmp" | "owner">;

/**
 * Read size of a download, and so its message size. Measured on 1 GiB: 256 KiB reads reached about half
 * of what 512 KiB do; 1 MiB was as fast in some server processes and in others took three times the
 * CPU (~1.8 s a GiB instead of ~0.6 s). A gRPC message stays far below the 4 MiB gRPC clients accept.
 */
export const DOWNLOAD_CHUNK_BYTES = 512 * 1024;

/**
 * How much of an upload may wait for the disk. Fs write streams hold 16 KiB by default, which made
 * every 64 KiB network chunk wait for its own write; with room, the chunks that come during a write
 * go out together in the next one (one writev).
 */
const UPLOAD_BUFFER_BYTES = 4 * 1024 * 1024;

/**
 * Moves the staged file ($2) to its destination ($3), creating its folder ($1). A regular file already
 * there is first renamed aside ($4, put back if the move fails) and removed after (what a session put
 * there meanwhile may stay, in its own folder, without failing the upload): ext4 (auto_da_alloc)
 * writes back a file renamed over another before the rename returns, ~300 ms for a 1 GiB upload,
 * while a rename to a free name costs nothing. A symlink there is replaced itself, as by `mv`.
 */
const MOVE_INTO_PLACE =
  'mkdir -p -- "$1" && if [ -f "$3" ] && [ ! -L "$3" ]; then mv -f -- "$3" "$4" && { mv -f -- "$2" "$3" || { mv -f -- "$4" "$3"; exit 1; }; } && { rm -f -- "$4"; true; }; else mv -f -- "$2" "$3"; fi';

/** Linux's O_PATH, which Node does not name: a descriptor that only names a file, opening nothing. */
const O_PATH = 0o10000000;

/** `path` is `root` or lies below it. */
function inside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

/** `requested` joined to `root`, a leading `/` not escaping it; undefined when `..` leaves the root. */
function lexical(root: string, requested: string): string | undefined {
  const path = resolve(root, `.${sep}${requested.replace(/^\/+/, "")}`);
  return inside(root, path) ? path : undefined;
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** The deepest existing ancestor of `path` (or `path` itself), with symlinks resolved. */
async function deepestExisting(path: string): Promise<string> {
  let current = path;
  for (;;) {
    try {
      return await realpath(current);
    } catch {
      const parent = dirname(current);
      if (parent === current) throw badPath("Destination folder is not valid");
      current = parent;
    }
  }
}

export interface UploadTarget {
  /** The session root the path is relative to (work or temporary folder). */
  readonly root: string;
  /** Destination relative to the root: the `path` field, or the uploaded file's name. */
  readonly path: string;
  readonly overwrite: boolean;
}

/**
 * An upload in progress. Bytes go to a staging file in the session's own folder (beside its work and
 * temporary folders, so on the same file system, and never visible to R) because the destination may
 * only be known once the whole request was read; `commit` then checks it and renames the file into
 * place, so a failed upload never leaves a partial or corrupted file behind.
 */
export class Upload {
  private readonly file: string;
  /** Where a file the upload replaces waits until the upload is in place (see MOVE_INTO_PLACE). */
  private readonly aside: string;
  private readonly stream: WriteStream;
  private bytes = 0;

  /**
   * `owner`: the isolated session's uid/gid, which the file gets (through its descriptor, so a path
   * swapped meanwhile cannot redirect it) and which moves it into place.
   */
  constructor(
    stagingDir: string,
    private readonly owner?: Owner,
  ) {
    this.file = join(stagingDir, `.upload-${randomBytes(8).toString("hex")}`);
    this.aside = `${this.file}.replaced`;
    this.stream = createWriteStream(this.file, { flags: "wx", mode: 0o600, highWaterMark: UPLOAD_BUFFER_BYTES });
    this.stream.on("error", () => undefined);
    if (owner) this.stream.once("open", (fd: number) => fchownSync(fd, owner.uid, owner.gid));
  }

  get size(): number {
    return this.bytes;
  }

  /** Writes a chunk, waiting when the file system is slower than the network. */
  async write(chunk: Uint8Array): Promise<void> {
    this.bytes += chunk.length;
    if (!this.stream.write(chunk)) {
      await new Promise<void>((resolve, reject) => {
        const onError = (error: Error): void => reject(error);
        this.stream.once("error", onError);
        this.stream.once("drain", () => {
          this.stream.off("error", onError);
          resolve();
        });
      });
    }
  }

  /** Moves the file to its destination; throws the 400 errors of the contract. */
  async commit(target: UploadTarget): Promise<{ path: string; size: number }> {
    try {
      this.stream.end();
      await finished(this.stream);
      const destination = await checkDestination(target);
      if (this.owner)
        await runAs(this.owner, "sh", ["-c", MOVE_INTO_PLACE, "sh", dirname(destination), this.file, destination, this.aside]).catch(() => {
          throw badPath("Destination folder is not valid");
        });
      else {
        await moveIntoPlace(this.file, destination, this.aside).catch(() => {
          throw badPath("Destination folder is not valid");
        });
      }
      return { path: relative(target.root, destination), size: this.bytes };
    } finally {
      await this.discard();
    }
  }

  async discard(): Promise<void> {
    this.stream.destroy();
    // The file may still be opening: removed before that ends, it would appear after the removal.
    await finished(this.stream).catch(() => undefined);
    // A session may have put a folder at these names in its own folder: that stays, its own.
    await Promise.all([this.file, this.aside].map((path) => rm(path, { force: true }).catch(() => undefined)));
  }
}

/** MOVE_INTO_PLACE for a session that is not isolated (no uid of its own to run it as). */
async function moveIntoPlace(file: string, destination: string, aside: string): Promise<void> {
  await mkdir(dirname(destination), { recursive: true });
  if (!(await lstat(destination).catch(() => undefined))?.isFile()) return rename(file, destination);
  await rename(destination, aside);
  try {
    await rename(file, destination);
  } catch (error) {
    await rename(aside, destination);
    throw error;
  }
  await rm(aside, { force: true }).catch(() => undefined);
}

async function checkDestination({ root, path, overwrite }: UploadTarget): Promise<string> {
  const destination = lexical(root, path);
  if (destination === undefined) throw badPath("Destination folder is not valid");
  if (destination === root || path.endsWith("/")) throw badPath("Destination file cannot be a directory");
  const realRoot = await realpath(root);
  const ancestor = await deepestExisting(dirname(destination));
  if (!inside(realRoot, ancestor) || !(await stat(ancestor)).isDirectory()) {
    throw badPath("Destination folder is not valid");
  }
  if (await exists(destination)) {
    const real = await realpath(destination).catch(() => undefined);
    if (real === undefined || !inside(realRoot, real)) throw badPath("Destination folder is not valid");
    if ((await stat(real)).isDirectory()) throw badPath("Destination file cannot be a directory");
    if (!overwrite) throw badPath("File exists and cannot be overridden");
  }
  return destination;
}

/**
 * Opens a session file for download, refusing (400) what is missing, a folder, or resolves outside the
 * root; the file is opened before anything is sent, so errors come before the first chunk.
 */
export async function openDownload(dirs: DownloadDirs, temp: boolean, path: string): Promise<AsyncIterable<Buffer>> {
  const root = temp ? dirs.tmp : dirs.work;
  const source = lexical(root, path);
  if (source === undefined) throw badPath("Source file path is not valid");
  const real = await realpath(source).catch(() => undefined);
  if (real === undefined) throw badPath("File does not exist");
  if (!inside(await realpath(root), real)) throw badPath("Source file path is not valid");
  return chunksOf(await openChecked(real, dirs));
}

/** Buffers a download reads into in turn: the chunk given, the one read meanwhile, one the consumer may still hold. */
const DOWNLOAD_BUFFERS = 3;

/**
 * The file's bytes, read into the same few buffers in turn, the next chunk read while one is sent.
 * A fresh buffer per chunk (a ReadStream's) put a GiB of memory outside V8's heap through its collector
 * for each GiB sent, and a download then went on either with no full collection (~2.5 GB/s) or with
 * 30–40 mark-compacts and three times the CPU (~1 GB/s), from one transfer to the next: the spread of
 * `BENCH_ONLY=transfers`. With buffers used again, a GiB takes one or two scavenges and no mark-compact.
 * A chunk stays valid until the consumer asks for the one after the next: every consumer here writes or
 * serializes a chunk before it asks for another, and holds at most one more (REST reads two messages
 * before writing the first).
 */
async function* chunksOf(handle: FileHandle): AsyncGenerator<Buffer> {
  const buffers = Array.from({ length: DOWNLOAD_BUFFERS }, () => Buffer.allocUnsafeSlow(DOWNLOAD_CHUNK_BYTES));
  let turn = 0;
  const read = (into: Buffer) => {
    const reading = handle.read(into, 0, into.length, null);
    // Until it is awaited, a failed read is not an unhandled rejection: the await below throws it.
    reading.catch(() => undefined);
    return reading;
  };
  let next = read(buffers[0]!);
  try {
    for (;;) {
      const { bytesRead, buffer } = await next;
      if (bytesRead === 0) return;
      turn = (turn + 1) % DOWNLOAD_BUFFERS;
      next = read(buffers[turn]!);
      yield buffer.subarray(0, bytesRead);
    }
  } finally {
    // A read under way must end before its descriptor is closed.
    await next.catch(() => undefined);
    await handle.close();
  }
}

/**
 * Opens the file at `real` once what is there was checked. The session owns the folders on the way and
 * can swap one for a symlink to anywhere after `real` was resolved, so the path is first only named
 * (O_PATH: no device's open runs, a FIFO does not block, nothing is read) and the checks are on the
 * file so named, not on the path: a regular file, inside the session's own folder (which it cannot move
 * or replace: its parent is the service's), that the session's uid could read itself. Only then is that
 * same file opened, through its descriptor, so a path swapped meanwhile leads nowhere else.
 */
async function openChecked(real: string, dirs: DownloadDirs): Promise<FileHandle> {
  const named = await open(real, O_PATH | constants.O_NOFOLLOW).catch(() => {
    throw badPath("File does not exist");
  });
  try {
    const where = await readlink(`/proc/self/fd/${named.fd}`);
    if (!inside(await realpath(dirs.home), where)) throw badPath("Source file path is not valid");
    const file = await named.stat();
    if (file.isDirectory()) throw badPath("File is a directory");
    // A symlink swapped in for the last name is named itself (O_NOFOLLOW), and refused here.
    if (!file.isFile() || (dirs.owner && !readableBy(file, dirs.owner))) throw badPath("Source file path is not valid");
    return await open(`/proc/self/fd/${named.fd}`, constants.O_RDONLY);
  } finally {
    await named.close();
  }
}

/**
 * Whether the session's uid (group: its own gid, no other) could read a file: its own file it could
 * make readable; anyone else's (a hard link to one, say) by the bits the kernel would look at.
 */
function readableBy(file: Stats, owner: Owner): boolean {
  if (file.uid === owner.uid) return true;
  return (file.mode & (file.gid === owner.gid ? 0o040 : 0o004)) !== 0;
}
