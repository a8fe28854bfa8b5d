import { expect } from "chai";
import { accessSync, constants, existsSync, mkdtempSync, readFileSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestServer } from "../support/server.js";
import { rest } from "../support/clients.js";
import { ROOT, runMain } from "../support/main-process.js";
import { ISOLATION_CAPABILITIES, missingIsolationCapabilities } from "../../src/r/confine/capabilities.js";

const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string; bin?: Record<string, string> };

describe("command line", function () {
  this.timeout(60_000);

  it("--help: usage on stdout, exit 0", async () => {
    const run = await runMain(["--help"]);
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.match(/^Usage: rock-ts /m);
    for (const word of ["--config FILE", "--version", "hash-password", "ROCK_CONFIG"]) expect(run.stdout).to.include(word);
    expect(run.stderr).to.equal("");
  });

  it("--version: the version of package.json, exit 0", async () => {
    const run = await runMain(["--version"]);
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.equal(`${pkg.version}\n`);
  });

  it("usage errors exit 2 and say what was wrong: an unknown flag, a command, a missing value", async () => {
    const cases: Array<[string[], RegExp]> = [
      [["--bogus"], /rock-ts: unknown option '--bogus'/],
      [["serve-forever"], /rock-ts: unknown command 'serve-forever'/],
      [["--config"], /rock-ts: option '--config' needs a value/],
      [["hash-password", "--config", "x.yaml"], /rock-ts: hash-password takes no option but --help/],
    ];
    for (const [args, message] of cases) {
      const run = await runMain(args);
      expect(run.code, `${args.join(" ")}: ${run.stderr}`).to.equal(2);
      expect(run.stderr).to.match(message);
      expect(run.stderr).to.include("rock-ts --help");
      expect(run.stdout).to.equal("");
    }
  });

  it("a configuration file that cannot be read stops the start (exit 1), naming it", async () => {
    const run = await runMain(["--config", "/nonexistent/rock.yaml"]);
    expect(run.code, run.stderr).to.equal(1);
    expect(run.stderr).to.include("/nonexistent/rock.yaml");
  });

  it("hash-password reads a piped password and prints its stored form, which then logs in", async () => {
    const run = await runMain(["hash-password"], { input: "correct horse:battery\n" });
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.match(/^\{bcrypt\}\$2b\$10\$[./A-Za-z0-9]{53}\n$/);
    const server = await startTestServer({ users: [{ name: "ann", secret: run.stdout.trim(), roles: ["user"] }] });
    try {
      expect((await rest(server.url, "GET", "/r/sessions", { user: "ann", password: "correct horse:battery" })).status).to.equal(200);
      expect((await rest(server.url, "GET", "/r/sessions", { user: "ann", password: "correct horse:battery\n" })).status).to.equal(401);
    } finally {
      await server.stop();
    }
  });

  it("hash-password refuses an empty password (exit 1)", async () => {
    const run = await runMain(["hash-password"], { input: "\n" });
    expect(run.code).to.equal(1);
    expect(run.stderr).to.match(/rock-ts: the password is empty/);
    expect(run.stdout).to.equal("");
  });

  it("has a bin, a node script that runs the same program (npx rock-ts)", async () => {
    const bin = pkg.bin?.["rock-ts"];
    expect(bin, "package.json bin.rock-ts").to.be.a("string");
    const file = join(ROOT, bin!);
    expect(readFileSync(file, "utf8")).to.match(/^#!\/usr\/bin\/env node\n/);
    accessSync(file, constants.X_OK);
    const run = await runMain(["--version"], { command: [file] });
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.equal(`${pkg.version}\n`);
  });

  describe("as root, the capabilities session isolation needs", () => {
    const status = (capEff: string) => `Name:\tnode\nCapInh:\t0000000000000000\nCapEff:\t${capEff}\nCapBnd:\t${capEff}\n`;

    it("are read from the effective set: each one missing is named, none when all are there", () => {
      // What docker run --cap-drop ALL --cap-add (the six) gives: 0xeb = bits 0 1 3 5 6 7.
      expect(missingIsolationCapabilities(status("00000000000000eb"))).to.deep.equal([]);
      expect(missingIsolationCapabilities(status("000001ffffffffff"))).to.deep.equal([]);
      expect(missingIsolationCapabilities(status("0000000000000000"))!.map((c) => c.name)).to.deep.equal(
        ISOLATION_CAPABILITIES.map((c) => c.name),
      );
      for (const cap of ISOLATION_CAPABILITIES) {
        const without = (0xebn & ~(1n << BigInt(cap.bit))).toString(16).padStart(16, "0");
        expect(
          missingIsolationCapabilities(status(without))!.map((c) => c.name),
          cap.name,
        ).to.deep.equal([cap.name]);
      }
      expect(missingIsolationCapabilities("no such line")).to.equal(undefined);
    });

    it("one missing refuses the start (exit 1), naming it and what it is for", async function () {
      if (process.getuid?.() !== 0) this.skip();
      const setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].find((f) => existsSync(f));
      if (!setpriv) this.skip();
      const data = mkdtempSync(join(tmpdir(), "rock-caps-"));
      try {
        // Root's effective set after exec is its bounding set: drop KILL there.
        const run = await runMain([], {
          command: [setpriv!, "--bounding-set", "-kill", process.execPath, "--import", "tsx", "src/main.ts"],
          env: {
            ROCK_DATA_DIR: data,
            ROCK_PORT: "0",
            ROCK_HOST: "127.0.0.1",
            ROCK_R_START: "false",
            ROCK_ADMINISTRATOR_NAME: "a",
            ROCK_ADMINISTRATOR_PASSWORD: "b",
          },
          timeoutMs: 15_000,
        });
        expect(run.code, `a start without CAP_KILL must be refused: ${run.stderr}`).to.equal(1);
        expect(run.stderr).to.match(/^rock-ts: the service runs as root.* lacks KILL \(KILL: interrupting an evaluation/m);
        expect(run.stderr).to.include("--cap-add KILL");
      } finally {
        rmSync(data, { recursive: true, force: true });
      }
    });
  });

  describe("npx rock-ts in the checkout, as the README says", () => {
    // npx installs the checkout itself into its cache (<cache>/_npx/<key>, the key a hash of the
    // checkout's path) as a link, makes the bin links there and runs the bin. A cache of the test's own
    // keeps the machine's ~/.npm untouched and is what a fresh machine has after `npm install`.
    let cache = "";
    const npx = (args: readonly string[]) =>
      runMain(args, {
        command: ["npx", "rock-ts"],
        env: { npm_config_cache: cache, npm_config_update_notifier: "false" },
        timeoutMs: 60_000,
      });
    const npm = (args: readonly string[]) =>
      runMain(args, { command: ["npm"], env: { npm_config_cache: cache, npm_config_update_notifier: "false" }, timeoutMs: 60_000 });
    const checkout = ROOT.replace(/\/$/, "");

    beforeEach(() => {
      cache = mkdtempSync(join(tmpdir(), "rock-npx-cache-"));
    });
    afterEach(() => rmSync(cache, { recursive: true, force: true }));

    it("npx rock-ts --help: the usage, exit 0", async () => {
      const run = await npx(["--help"]);
      expect(run.code, run.stderr).to.equal(0);
      expect(run.stdout).to.match(/^Usage: rock-ts /);
      expect(run.stderr).not.to.match(/not found/);
      const version = await npx(["--version"]);
      expect(version.code, version.stderr).to.equal(0);
      expect(version.stdout).to.equal(`${pkg.version}\n`);
    });

    it("a stale npx entry of the checkout (npm/cli#9766) is removed with npm cache npx rm, then npx works", async () => {
      expect((await npx(["--version"])).code).to.equal(0);
      // The state npx leaves when its entry was made while package.json's bin named another file: the
      // entry exists, its bin link does not, and npx never makes it again.
      const listed = await npm(["cache", "npx", "ls"]);
      expect(listed.code, listed.stderr).to.equal(0);
      const key = listed.stdout
        .split("\n")
        .map((l) => /^([0-9a-f]+): (.*)$/.exec(l))
        .find((m) => m?.[2] === checkout)?.[1];
      expect(key, `npm cache npx ls names ${checkout}: ${listed.stdout}`).to.be.a("string");
      const link = join(cache, "_npx", key!, "node_modules", ".bin", "rock-ts");
      expect(existsSync(link), link).to.equal(true);
      unlinkSync(link);
      const stale = await npx(["--version"]);
      // npm 11.19 answers `sh: 1: rock-ts: not found`, exit 127; an npm with #9766 fixed runs it.
      if (stale.code !== 0) expect(stale.stderr).to.match(/rock-ts: not found/);

      const removed = await npm(["cache", "npx", "rm", key!]);
      expect(removed.code, removed.stderr).to.equal(0);
      expect(existsSync(join(cache, "_npx", key!))).to.equal(false);
      const again = await npx(["--version"]);
      expect(again.code, again.stderr).to.equal(0);
      expect(again.stdout).to.equal(`${pkg.version}\n`);
    });
  });
});
