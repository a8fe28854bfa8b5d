import { expect } from "chai";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { caller, ctxOf, startRig, until, type Rig } from "./support.js";

/**
 * A DELETE answers once the session cannot be reached; the rest of its end (its processes reaped, its
 * folders removed, its control group released) goes on after the answer, counted against
 * r.maxSessions and holding its uid until done, and a step of it that fails is said and tried again.
 */
describe("a session's end after its DELETE answered", function () {
  this.timeout(60_000);
  const alice = caller("alice", "user");
  let rig: Rig;

  afterEach(async () => {
    await rig?.close();
  });

  const create = async (): Promise<string> =>
    (await rig.handlers.createSession!({ $typeName: "rock.r.v1.CreateSessionRequest" }, ctxOf(alice))).session!.id!;
  const remove = async (id: string): Promise<void> => {
    await rig.handlers.deleteSession!({ $typeName: "rock.r.v1.DeleteSessionRequest", id }, ctxOf(alice));
  };
  const logged = (): string[] => {
    const lines: string[] = [];
    rig.log.subscribe((line) => lines.push(line));
    return lines;
  };

  it("counts a deleted session against r.maxSessions until its end is done: a creation waits for it rather than being refused", async () => {
    rig = await startRig({ maxSessions: 1, spareSessions: 0 });
    for (let i = 0; i < 5; i++) {
      const id = await create();
      const home = rig.engine.session(id).dirs.home;
      await remove(id);
      expect(() => rig.engine.session(id)).to.throw(/No such R session/);
      const next = await create();
      // The one place under the limit was free only once the deleted session's folders were gone.
      expect(existsSync(home), "the deleted session's folder when the next was created").to.equal(false);
      await remove(next);
    }
  });

  it("says a step of the end that fails and tries it again until it is done", async function () {
    if (process.getuid?.() !== 0) this.skip();
    rig = await startRig({ spareSessions: 0 });
    const lines = logged();
    const id = await create();
    const dirs = rig.engine.session(id).dirs;
    // A file system mounted in the session's folder: its removal fails (EBUSY) while it is mounted.
    const mount = join(dirs.work, "mounted");
    mkdirSync(mount);
    execFileSync("mount", ["-t", "tmpfs", "tmpfs", mount]);
    try {
      await remove(id);
      await until(() => lines.some((line) => line.includes(`R session ${id}:`) && line.includes("tried again in 1 s")));
      expect(existsSync(dirs.home)).to.equal(true);
    } finally {
      execFileSync("umount", [mount]);
    }
    await until(() => !existsSync(dirs.home), 10_000);
  });

  it("names the file it cannot remove and the kernel's reason, then removes it once it can, a link to a folder as a link", async function () {
    if (process.getuid?.() !== 0) this.skip();
    rig = await startRig({ spareSessions: 0 });
    const lines = logged();
    const id = await create();
    const dirs = rig.engine.session(id).dirs;
    // An immutable file: even root's unlink is refused (EPERM), as it is for a file in a folder the
    // session made sticky where the service lacks CAP_FOWNER. Node's recursive rm said `ENOTDIR … scandir`.
    const kept = join(dirs.work, "kept");
    writeFileSync(kept, "x");
    try {
      execFileSync("chattr", ["+i", kept], { stdio: "pipe" });
    } catch (error) {
      // A container without CAP_LINUX_IMMUTABLE (Docker's default set), a file system without the flag.
      console.log(`      skipped: chattr +i refused here (${String(error).split("\n")[0]})`);
      await remove(id);
      this.skip();
    }
    // A link to a folder outside, which the removal must not follow.
    const outside = mkdtempSync(join(tmpdir(), "rock-outside-"));
    writeFileSync(join(outside, "theirs"), "y");
    symlinkSync(outside, join(dirs.work, "link"));
    try {
      await remove(id);
      await until(() => lines.some((line) => line.includes(`R session ${id}:`)));
      const line = lines.find((l) => l.includes(`R session ${id}:`));
      expect(line).to.include(`EPERM: operation not permitted, unlink '${kept}'; tried again in 1 s`);
    } finally {
      execFileSync("chattr", ["-i", kept]);
    }
    await until(() => !existsSync(dirs.home), 10_000);
    expect(readFileSync(join(outside, "theirs"), "utf8"), "what the link pointed to").to.equal("y");
    rmSync(outside, { recursive: true, force: true });
  });
});
