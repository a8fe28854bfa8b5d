import { expect } from "chai";
import path from "node:path";
import { execa } from "execa";
import { defaults } from "../../src/config/load.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { createPackageWorld, type PackageWorld } from "../packages/fixtures.js";

const SCRIPT = path.resolve(import.meta.dirname, "rockr-client.R");

async function runRockr(server: TestServer, part: string, env: Record<string, string> = {}) {
  const r = await execa("Rscript", ["--vanilla", SCRIPT], {
    // rockr is installed into the setup library by npm test when R's libraries lack it.
    env: { ...env, R_LIBS: defaults().r.setupLibrary, ROCK_URL: server.url, ROCKR_PART: part },
    reject: false,
    timeout: 120_000,
  });
  const checks = r.stdout
    .split("\n")
    .filter((l) => l.startsWith("ok "))
    .map((l) => l.slice(3).trim());
  return { ...r, checks };
}

describe("rockr (the R client from CRAN) against the server", function () {
  this.timeout(180_000);

  describe("sessions, eval, assign, commands, files, R server", () => {
    let server: TestServer;
    before(async () => (server = await startTestServer({ r: { startOnBoot: true } })));
    after(() => server.stop());

    it("works unchanged", async () => {
      const r = await runRockr(server, "session");
      expect(r.exitCode, r.stderr + r.stdout).to.equal(0);
      expect(r.stdout).to.include("done");
      expect(r.exitCode).to.equal(0);
      expect(r.checks).to.include.members(["eval raw", "assign data", "command result", "download gives the same bytes", "started"]);
    });
  });

  describe("packages", () => {
    let world: PackageWorld;
    let server: TestServer;
    before(async function () {
      this.timeout(300_000);
      world = await createPackageWorld();
      server = await startTestServer({
        packages: { repos: [world.repoUrl], library: world.library, gitHost: world.gitHost, gitOrganization: world.gitOrganization },
      });
    });
    after(async () => {
      await server?.stop();
      await world?.dispose();
    });

    it("works unchanged", async () => {
      const r = await runRockr(server, "packages", world.env);
      expect(r.exitCode, r.stderr + r.stdout).to.equal(0);
      expect(r.stdout).to.include("done");
      expect(r.exitCode).to.equal(0);
    });
  });
});
