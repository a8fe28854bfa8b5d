import { randomBytes } from "node:crypto";
import { createWriteStream, fchownSync, type WriteStream } from "node:fs";
import { lstat, mkdir, open, realpath, rename, rm, stat } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { finished } from "node:stream/promises";
import { readAs, runAs, type Owner } from "./confine/as-owner.js";
import { badPath } from "./errors.js";

export const DOWNLOAD_CHUNK_BYTES = 256 * 1024;

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
    this.stream = createWriteStream(this.file, { flags: "wx", mode: 0o600 });
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
      if (this.owner) await runAs(this.owner, "sh", ["-c", 'mkdir -p -- "$1" && mv -f -- "$2" "$3"', "sh", dirname(destination), this.file, destination]).catch(() => {
        throw badPath("Destination folder is not valid");
      });
      else {
        await mkdir(dirname(destination), { recursive: true });
        await rename(this.file, destination);
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
    await rm(this.file, { force: true });
  }
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
export async function openDownload(root: string, path: string, owner?: Owner): Promise<AsyncIterable<Buffer>> {
  const source = lexical(root, path);
  if (source === undefined) throw badPath("Source file path is not valid");
  const real = await realpath(source).catch(() => undefined);
  if (real === undefined) throw badPath("File does not exist");
  if (!inside(await realpath(root), real)) throw badPath("Source file path is not valid");
  if (owner) {
    if ((await stat(real)).isDirectory()) throw badPath("File is a directory");
    return readAs(owner, real);
  }
  const handle = await open(real, "r");
  try {
    if ((await handle.stat()).isDirectory()) throw badPath("File is a directory");
  } catch (error) {
    await handle.close();
    throw error;
  }
  return handle.createReadStream({ highWaterMark: DOWNLOAD_CHUNK_BYTES });
}
