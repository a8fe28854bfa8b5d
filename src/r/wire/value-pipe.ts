import { execFile } from "node:child_process";
import { close, closeSync, constants, fstat, open as openFd, openSync } from "node:fs";
import { rm } from "node:fs/promises";
import { Socket } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { runAs, type Owner } from "../confine/as-owner.js";
import { VALUE_PIPE } from "./protocol-table.js";

/** A session's folder for its value pipe (its home, above the working folder the file calls reach), and who owns it. */
export interface PipeDirs {
  readonly home: string;
  readonly owner?: Owner;
}

/**
 * The FIFO large values go through between Node and R, in a session's home: into R for a streamed
 * assign (value-feed.ts), out of R for a large answer (AnswerPipe, made anew by R itself). One job
 * runs at a time, so one pipe serves both ways. Node makes it only when it is missing or replaced:
 * that takes a process (Node has no mkfifo), ~5 ms of the event loop's time (a CPU profile, by hand).
 */
export function valuePipePath(dirs: PipeDirs): string {
  return join(dirs.home, VALUE_PIPE);
}

/** Makes the session's value pipe anew, as its uid when it has one (its folder is its own). */
export async function makeValuePipe(dirs: PipeDirs): Promise<void> {
  const path = valuePipePath(dirs);
  // Whatever the session put at its name goes first.
  await rm(path, { force: true, recursive: true });
  const args = ["-m", "600", "--", path];
  if (dirs.owner) await runAs(dirs.owner, "mkfifo", args);
  else await new Promise<void>((resolve, reject) => execFile("mkfifo", args, (error) => (error ? reject(error) : resolve())));
}

/**
 * Opens the session's value pipe, non-blocking: to write into (O_RDWR, which Linux lets open a FIFO at
 * once, without waiting for R; pipe-writer.ts) or to read from. The session owns the folder and could
 * swap the name for a symlink or another file after it was made: the last name is not followed, and
 * what was opened must be a FIFO of the session's own uid, or it is closed unused. A bare descriptor,
 * not a FileHandle: whoever takes it owns it (a FileHandle closes its descriptor when it is collected).
 */
export async function openValuePipe(dirs: PipeDirs, way: "write" | "read"): Promise<number> {
  const flags = (way === "write" ? constants.O_RDWR : constants.O_RDONLY) | constants.O_NONBLOCK | constants.O_NOFOLLOW;
  const fd = await promisify(openFd)(valuePipePath(dirs), flags);
  try {
    const file = await promisify(fstat)(fd);
    if (!file.isFIFO() || file.uid !== (dirs.owner?.uid ?? process.getuid?.() ?? 0))
      throw new Error("the pipe to the session was replaced");
  } catch (error) {
    close(fd, () => undefined);
    throw error;
  }
  return fd;
}

/**
 * A large answer on its way out of R (issue 30): R's serialize() writes it into the value pipe, where
 * it is read as it comes and handed to `take`, so R never builds the whole serialization in memory
 * (serialize(x, NULL) grows a raw vector copy by copy: 0.23 s for 80 MB, against 0.08 s into a
 * pipe, measured by hand; the whole answer is BENCH_ONLY=assign's). R makes the pipe anew, says it
 * starts (`open`) and opens the pipe for writing, which waits until it is opened here: R then writes
 * into a reader that exists, and closes it when the value is whole, which is the end read here.
 */
export class AnswerPipe {
  private socket: Socket | undefined;
  /** The descriptor the socket reads. */
  private fd = -1;
  private done: Promise<void> | undefined;
  /** The bytes are not wanted any more: the rest is read and dropped, so R's writes end. */
  private dropping = false;
  /** R answered: whatever wrote into the pipe has closed it. */
  private answered = false;

  /** `take` answers false when it is full: nothing more is read until `resume`. */
  constructor(private readonly take: (bytes: Buffer) => boolean) {}

  /** R started writing: the pipe is opened for reading, as R waits for that. */
  open(dirs: PipeDirs): void {
    this.done = openValuePipe(dirs, "read").then(
      (fd) =>
        new Promise<void>((resolve, reject) => {
          const socket = new Socket({ fd, readable: true, writable: false });
          this.socket = socket;
          this.fd = fd;
          if (this.dropping) socket.resume();
          if (this.answered) this.markEnd();
          socket.on("data", (bytes: Buffer) => {
            if (!this.dropping && !this.take(bytes)) socket.pause();
          });
          socket.on("error", (error) => {
            socket.destroy();
            reject(error);
          });
          socket.on("end", () => socket.destroy());
          socket.on("close", () => resolve());
        }),
      (error: unknown) => {
        throw new Error(`the session's value pipe could not be read (${error instanceof Error ? error.message : String(error)})`);
      },
    );
    // Awaited by ended(), maybe later than the failure.
    this.done.catch(() => undefined);
  }

  resume(): void {
    this.socket?.resume();
  }

  /** Nothing more is taken: what R still writes is read and dropped. */
  drop(): void {
    this.dropping = true;
    this.socket?.resume();
  }

  /**
   * R answered (or its process ended), so its writer is closed. A pipe's reader sees its end only once
   * a writer came and went: a writer opened and closed here marks it, so the read ends when the pipe is
   * empty even when no writer ever came (R code that wrote the piping frame itself), and the
   * descriptor does not outlive the answer.
   */
  answer(): void {
    this.answered = true;
    if (this.socket) this.markEnd();
  }

  private markEnd(): void {
    // Synchronously after the check: the descriptor's number cannot be another file's meanwhile.
    if (this.socket?.destroyed !== false) return;
    try {
      closeSync(openSync(`/proc/self/fd/${this.fd}`, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // Closed meanwhile: its end was read.
    }
  }

  /** Resolves once R's writing ended (the end of the pipe read); rejects when the pipe could not be read. */
  ended(): Promise<void> {
    return this.done ?? Promise.resolve();
  }
}
