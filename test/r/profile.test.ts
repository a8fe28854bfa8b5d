/**
 * r.profile: R code the R server runs before it forks sessions. Sessions see what it attached and the
 * options it set, not the objects it made; an error in it fails the start with R's message.
 */
import { expect } from "chai";
import type { Fault } from "../../src/errors/fault.js";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startRig, text, type Rig } from "./support.js";

describe("R profile (r.profile)", function () {
  this.timeout(60_000);
  let rig: Rig | undefined;
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "rock-profile-test-"));
  });

  afterEach(async () => {
    await rig?.close();
    rig = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  function profile(code: string): string {
    const file = join(dir, "profile.R");
    writeFileSync(file, code, { mode: 0o644 });
    return file;
  }

  it("runs before sessions fork: they see its packages and options, not its objects", async () => {
    rig = await startRig({ profile: profile('options(rock.test = "yes")\nlibrary(tools)\nprofileObject <- 1\n') });
    const session = await rig.engine.createSession("alice");
    const value = async (code: string) => (await session.eval(text(code), "json")).toString();
    expect(await value('getOption("rock.test")')).to.equal('"yes"');
    expect(await value('"package:tools" %in% search()')).to.equal("true");
    expect(await value("ls(globalenv(), all.names = TRUE)")).to.equal("[]");
    expect(await value('exists("profileObject")')).to.equal("false");
    // Sessions forked later, after others, see the same.
    const next = await rig.engine.createSession("bob");
    expect((await next.eval(text('getOption("rock.test")'), "json")).toString()).to.equal('"yes"');
  });

  it("fails the R server's start with R's message when the profile fails; sessions then answer 500", async () => {
    const file = profile("options(a = 1)\nlibrary(notAnInstalledPackage)\n");
    rig = await startRig({ profile: file, startOnBoot: false });
    const failure = (await rig.engine.start().catch((e: unknown) => e)) as Error;
    expect(failure).to.be.instanceOf(Error);
    expect(failure.message).to.contain(`R profile ${file} failed`);
    expect(failure.message).to.match(/Error in library\(notAnInstalledPackage\): there is no package called .notAnInstalledPackage./);
    expect(rig.log.last(20).join("\n")).to.contain(`R profile ${file} failed`);
    expect(rig.engine.running).to.equal(false);
    // Nothing will start it: no wait, the contract's 500.
    const refused = await rig.engine.createSession("alice").catch((e: unknown) => e);
    expect((refused as Fault).kind).to.equal("internal");
  });

  it("refuses a profile that other users could rewrite (it runs with the service's rights)", async () => {
    const file = profile("options(a = 1)\n");
    chmodSync(file, 0o666);
    rig = await startRig({ profile: file, startOnBoot: false });
    const failure = (await rig.engine.start().catch((e: unknown) => e)) as Error;
    expect(failure.message).to.contain(`r.profile ${file} is writable by other users`);
    expect(rig.engine.running).to.equal(false);
  });
});
