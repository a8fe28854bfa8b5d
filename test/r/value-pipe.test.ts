import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { PipeWriter } from "../../src/r/wire/pipe-writer.js";
import { AnswerPipe, makeValuePipe, valuePipePath } from "../../src/r/wire/value-pipe.js";

/** This process's descriptors open on `file` (a FIFO keeps its name in /proc/self/fd). */
function descriptorsOn(file: string): number {
  return fs.readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return fs.readlinkSync(`/proc/self/fd/${fd}`) === file;
    } catch {
      return false;
    }
  }).length;
}

async function until(test: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((resolve) => setTimeout(resolve, 20))) if (test()) return true;
  return test();
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once("exit", resolve)));
}

/** The value pipe both ways, on a real FIFO in a temporary home, read or written by real processes as R does. */
describe("the value pipe", function () {
  this.timeout(30_000);
  let home: string;
  let fifo: string;
  const children: ChildProcess[] = [];

  beforeEach(async () => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), "rock-pipe-"));
    await makeValuePipe({ home });
    fifo = valuePipePath({ home });
  });
  afterEach(() => {
    for (const child of children.splice(0)) child.kill("SIGKILL");
    fs.rmSync(home, { recursive: true, force: true });
  });

  describe("PipeWriter: a value written into a session's pipe from a thread of its own", () => {
    it("delivers the bytes whole and in order, pieces of any size, then the end of the pipe", async () => {
      const out = path.join(home, "out");
      const reader = spawn("sh", ["-c", `cat "${fifo}" > "${out}"`]);
      children.push(reader);
      const bytes = randomBytes(20 * 1024 * 1024);
      const writer = await PipeWriter.open({ home });
      // Pieces of odd sizes, some larger than the ring (2 MiB), in batches.
      const sizes = [1, 7, 65_536, 3_000_000, 123_457, 5_000_000];
      for (let at = 0, i = 0; at < bytes.length; i++) {
        const batch: Buffer[] = [];
        for (let k = 0; k < 3 && at < bytes.length; k++) {
          const size = Math.min(sizes[(i + k) % sizes.length]!, bytes.length - at);
          batch.push(bytes.subarray(at, at + size));
          at += size;
        }
        await writer.write(batch);
      }
      await writer.end();
      expect(await exited(reader)).to.equal(0);
      const digest = (b: Buffer) => createHash("md5").update(b).digest("hex");
      expect(digest(fs.readFileSync(out))).to.equal(digest(bytes));
      expect(await until(() => descriptorsOn(fifo) === 0, 5000), "the pipe's descriptors are closed").to.equal(true);
    });

    it("given up while its thread is blocked on a reader that stopped, reads the rest back and closes the pipe", async () => {
      // Reads 100 kB, then stops reading (stopped, as an R whose own processes stop it could be).
      const reader = spawn("sh", ["-c", `exec 3<"${fifo}"; head -c 100000 <&3 > /dev/null; kill -STOP $$; cat <&3 > /dev/null`]);
      children.push(reader);
      const writer = await PipeWriter.open({ home });
      const writing = writer.write([randomBytes(8 * 1024 * 1024)]);
      // The ring is full and the thread blocked in the kernel: the write waits.
      const settled = await Promise.race([writing.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), 500))]);
      expect(settled, "a write into a pipe nobody reads resolved").to.equal(false);
      expect(descriptorsOn(fifo)).to.equal(2);
      writer.destroy();
      await writing;
      expect(await until(() => descriptorsOn(fifo) === 0, 5000), "the pipe's descriptors are closed").to.equal(true);
      // The thread is free again: the next writer's bytes arrive.
      reader.kill("SIGKILL");
      const out = path.join(home, "out");
      const next = spawn("sh", ["-c", `cat "${fifo}" > "${out}"`]);
      children.push(next);
      const second = await PipeWriter.open({ home });
      // More than the pipe holds, so the end waits for cat to read (as R opens the pipe after Node did):
      // bytes left in a pipe nobody opened to read are gone with its last descriptor.
      const after = randomBytes(1024 * 1024);
      await second.write([after]);
      await second.end();
      expect(await exited(next)).to.equal(0);
      expect(fs.readFileSync(out).equals(after)).to.equal(true);
    });

    it("opens nothing but a FIFO of the session's uid at the pipe's name: not a symlink to one", async () => {
      const elsewhere = path.join(home, "elsewhere");
      fs.renameSync(fifo, elsewhere);
      fs.symlinkSync(elsewhere, fifo);
      await PipeWriter.open({ home }).then(
        () => expect.fail("a symlink was followed"),
        (error: NodeJS.ErrnoException) => expect(error.code).to.equal("ELOOP"),
      );
      fs.rmSync(fifo);
      fs.writeFileSync(fifo, "a file");
      await PipeWriter.open({ home }).then(
        () => expect.fail("a regular file was taken for the pipe"),
        (error: Error) => expect(error.message).to.equal("the pipe to the session was replaced"),
      );
      expect(await until(() => descriptorsOn(fifo) === 0, 5000), "the file opened is closed again").to.equal(true);
    });
  });

  /** The reader of a large answer R writes into the value pipe. */
  describe("AnswerPipe: a large answer read from a session's pipe as R writes it", () => {
    /** A writer as R is: it opens the pipe for writing (waiting for the reader), writes `file`, closes it. */
    const writer = (file: string) => {
      const child = spawn("sh", ["-c", `cat "${file}" > "${fifo}"`]);
      children.push(child);
      return child;
    };

    it("hands the bytes on in order and ends with the writer; a full taker pauses the reading", async () => {
      const bytes = randomBytes(8 * 1024 * 1024);
      const source = path.join(home, "source");
      fs.writeFileSync(source, bytes);
      const taken: Buffer[] = [];
      let paused = 0;
      const answer = new AnswerPipe((piece) => {
        taken.push(piece);
        // Full every 16 pieces, then taking again a moment later.
        if (taken.length % 16 !== 0) return true;
        paused++;
        setTimeout(() => answer.resume(), 5);
        return false;
      });
      const child = writer(source);
      answer.open({ home });
      await answer.ended();
      expect(await exited(child)).to.equal(0);
      expect(Buffer.concat(taken).equals(bytes)).to.equal(true);
      expect(paused, "the taker was full at times").to.be.greaterThan(0);
    });

    it("given up, reads the rest and drops it, so the writer is not left blocked", async () => {
      const source = path.join(home, "source");
      fs.writeFileSync(source, randomBytes(8 * 1024 * 1024));
      let taken = 0;
      // Full at once and never resumed: without drop() the writer would wait forever.
      const answer = new AnswerPipe((piece) => {
        taken += piece.length;
        return false;
      });
      const child = writer(source);
      answer.open({ home });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(child.exitCode, "the writer is blocked on the full pipe").to.equal(null);
      answer.drop();
      await answer.ended();
      expect(await exited(child)).to.equal(0);
      expect(taken).to.be.lessThan(8 * 1024 * 1024);
    });

    it("fails when what is at the pipe's name is not the session's FIFO, saying so", async () => {
      fs.rmSync(fifo);
      fs.writeFileSync(fifo, "a file");
      const answer = new AnswerPipe(() => true);
      answer.open({ home });
      await answer.ended().then(
        () => expect.fail("a file was read as the pipe"),
        (error: Error) =>
          expect(error.message).to.equal("the session's value pipe could not be read (the pipe to the session was replaced)"),
      );
    });
  });
});
