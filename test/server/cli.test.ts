import { expect } from "chai";
import { accessSync, constants, readFileSync } from "node:fs";
import { join } from "node:path";
import { startTestServer } from "../support/server.js";
import { rest } from "../support/clients.js";
import { ROOT, runMain } from "../support/main-process.js";

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
});
