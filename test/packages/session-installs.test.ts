import { expect } from "chai";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import type { SessionInstalls } from "../../src/config/config.js";
import { rest, type RestAnswer } from "../support/clients.js";
import { startTestServer, USERS, type TestServer } from "../support/server.js";
import { until } from "../r/support.js";

/** Who runs the R server and opens sessions too (the manager alone may not open sessions). */
const OPERATOR = { name: "operator", secret: "operator", roles: ["manager", "user"] };
const RSCRIPT = { "content-type": "application/x-rscript", accept: "application/json" };

/**
 * R code that writes the source of a package `name` (no compiled code) in the session's working
 * folder: `hello()` answers `answer`; `broken` makes code that does not parse (it builds, and fails to
 * install).
 */
function packageSource(name: string, version: string, answer: string, broken = false): string {
  const description = [
    `Package: ${name}`,
    `Version: ${version}`,
    "Title: A Test Package",
    "Description: Installed from a session by the tests.",
    "License: MIT",
    "Author: The tests",
    "Maintainer: The tests <tests@example.org>",
  ];
  const code = broken ? "hello <- function( {" : `hello <- function() "${answer}"`;
  return `local({
    unlink("${name}", recursive = TRUE)
    dir.create(file.path("${name}", "R"), recursive = TRUE)
    writeLines(${JSON.stringify(description.join("\n"))}, file.path("${name}", "DESCRIPTION"))
    writeLines("export(hello)", file.path("${name}", "NAMESPACE"))
    writeLines(${JSON.stringify(code)}, file.path("${name}", "R", "hello.R"))
  })\n`;
}

/** install.packages() of a package folder the session wrote, as Opal installs an uploaded archive. */
const installScript = (name: string, version = "1.0.0", answer = "hello", broken = false): string =>
  `${packageSource(name, version, answer, broken)}install.packages("${name}", repos = NULL, type = "source", quiet = TRUE)\n"done"`;

describe("package installs from an R session (packages.sessionInstalls)", function () {
  this.timeout(240_000);
  let library: string;
  let server: TestServer | undefined;

  async function serve(sessionInstalls: SessionInstalls): Promise<TestServer> {
    await server?.stop();
    rmSync(library, { recursive: true, force: true });
    server = await startTestServer({ users: [...USERS, OPERATOR], r: { startOnBoot: true }, packages: { library, sessionInstalls } });
    return server;
  }

  async function open(who: string): Promise<string> {
    const created = await rest(server!.url, "POST", "/r/sessions", { user: who });
    expect(created.status, created.text).to.equal(201);
    return created.json<{ id: string }>().id;
  }

  const evaluate = (id: string, code: string, who: string): Promise<RestAnswer> =>
    rest(server!.url, "POST", `/r/session/${id}/_eval`, { user: who, headers: RSCRIPT, body: code });

  async function value<T>(id: string, code: string, who: string): Promise<T> {
    const answer = await evaluate(id, code, who);
    expect(answer.status, answer.text).to.equal(200);
    return answer.json<T>();
  }

  const close = (id: string, who: string): Promise<RestAnswer> => rest(server!.url, "DELETE", `/r/session/${id}`, { user: who });

  /** What `hello()` of `name` answers in a new session of `who`, or the error R gives. */
  async function helloIn(name: string, who: string): Promise<string> {
    const id = await open(who);
    try {
      return await value<string>(id, `tryCatch(${name}::hello(), error = function(e) paste("error:", conditionMessage(e)))`, who);
    } finally {
      await close(id, who);
    }
  }

  before(() => {
    library = join(mkdtempSync(join(os.tmpdir(), "rock-session-installs-")), "shared");
  });
  after(async () => {
    await server?.stop();
    rmSync(join(library, ".."), { recursive: true, force: true });
  });

  describe("auto (the default)", () => {
    before(() => serve("auto"));

    it("an administrator's install.packages() goes into the service's library, owned by the service, and every later session loads it", async () => {
      const id = await open("admin");
      expect(await value<string>(id, installScript("tpkgAdmin", "1.0.0", "shared"), "admin")).to.equal("done");
      // The session loads it at once too, from its own library.
      expect(await value<string>(id, "tpkgAdmin::hello()", "admin")).to.equal("shared");
      expect(readdirSync(library)).to.include("tpkgAdmin");
      const installed = statSync(join(library, "tpkgAdmin", "DESCRIPTION"));
      expect(installed.uid).to.equal(process.getuid?.());
      expect(installed.mode & 0o7022).to.equal(0);
      expect(await helloIn("tpkgAdmin", "user")).to.equal("shared");
      expect(await helloIn("tpkgAdmin", "admin")).to.equal("shared");
      expect(readdirSync(library).filter((name) => name.startsWith("00LOCK"))).to.deep.equal([]);
      expect((await close(id, "admin")).status).to.equal(204);
      // Shared for good: the session that installed it is gone.
      expect(await helloIn("tpkgAdmin", "user2")).to.equal("shared");
    });

    it("names a repository for installs that name none, as the package API's (R's own, its @CRAN@ made a mirror)", async () => {
      const id = await open("user");
      const repos = await value<string[]>(id, "unname(getOption('repos'))", "user");
      expect(repos).to.not.include("@CRAN@");
      expect(repos).to.include("https://cloud.r-project.org");
      await close(id, "user");
    });

    it("a manager's R CMD INSTALL through system() lands in the service's library too", async () => {
      const id = await open("operator");
      const code = `${packageSource("tpkgSystem", "1.0.0", "from system")}system2(file.path(R.home("bin"), "R"), c("CMD", "INSTALL", "tpkgSystem"), stdout = FALSE, stderr = FALSE)`;
      expect(await value<number>(id, code, "operator")).to.equal(0);
      await close(id, "operator");
      expect(await helloIn("tpkgSystem", "user")).to.equal("from system");
    });

    it("a user's install stays in a library of the session's own, first in .libPaths(), gone with the session", async () => {
      const id = await open("user");
      expect(await value<string>(id, installScript("tpkgOwn", "1.0.0", "mine"), "user")).to.equal("done");
      expect(await value<string>(id, "tpkgOwn::hello()", "user")).to.equal("mine");
      const first = await value<string>(id, ".libPaths()[1]", "user");
      expect(first).to.match(/\/library$/);
      expect(first).to.not.equal(library);
      expect(readdirSync(library)).to.not.include("tpkgOwn");
      // Neither another session of the same user nor anyone else's sees it.
      expect(await helloIn("tpkgOwn", "user")).to.match(/^error: there is no package called .tpkgOwn./);
      expect(await helloIn("tpkgOwn", "admin")).to.match(/^error: there is no package called .tpkgOwn./);
      expect((await close(id, "user")).status).to.equal(204);
      // Its end (its folders among it) goes on after the DELETE answered.
      const home = join(server!.dataDir, "sessions", id);
      await until(() => !existsSync(home));
    });

    it("an install that fails to build leaves the service's library as it was", async () => {
      const id = await open("admin");
      expect(await value<string>(id, installScript("tpkgKept", "1.0.0", "first"), "admin")).to.equal("done");
      // R reports a failed build as a warning: the call answers, and nothing changes.
      await evaluate(id, installScript("tpkgKept", "2.0.0", "second", true), "admin");
      await close(id, "admin");
      expect(await helloIn("tpkgKept", "user")).to.equal("first");
      expect(readdirSync(library).filter((name) => name.startsWith("00LOCK"))).to.deep.equal([]);
    });

    it("two administrators' sessions installing at once both land whole", async () => {
      const [a, b] = await Promise.all([open("admin"), open("admin")]);
      const done = await Promise.all([
        value<string>(a!, installScript("tpkgTwin", "1.0.0", "a"), "admin"),
        value<string>(b!, installScript("tpkgOther", "1.0.0", "b"), "admin"),
      ]);
      expect(done).to.deep.equal(["done", "done"]);
      // The same package from both: one whole copy wins.
      await Promise.all([
        value<string>(a!, installScript("tpkgTwin", "1.0.1", "a2"), "admin"),
        value<string>(b!, installScript("tpkgTwin", "1.0.2", "b2"), "admin"),
      ]);
      await Promise.all([close(a!, "admin"), close(b!, "admin")]);
      expect(await helloIn("tpkgOther", "user")).to.equal("b");
      expect(await helloIn("tpkgTwin", "user")).to.be.oneOf(["a2", "b2"]);
      expect(readdirSync(library).filter((name) => name.startsWith("00LOCK"))).to.deep.equal([]);
    });

    it("a user's installs survive a suspend and resume of the session", async () => {
      const id = await open("user");
      expect(await value<string>(id, installScript("tpkgSuspended", "1.0.0", "kept"), "user")).to.equal("done");
      const suspended = await rest(server!.url, "POST", `/r/session/${id}/_suspend`, { user: "user" });
      expect(suspended.status, suspended.text).to.equal(204);
      expect(await value<string>(id, "tpkgSuspended::hello()", "user")).to.equal("kept");
      await close(id, "user");
    });

    it("shares nothing of a package but its files, folders and links inside it: a link out of it is left out", async () => {
      const id = await open("admin");
      const code = `${packageSource("tpkgLinks", "1.0.0", "links")}
        install.packages("tpkgLinks", repos = NULL, type = "source", quiet = TRUE)
        installed <- file.path(.libPaths()[1], "tpkgLinks")
        file.symlink("/etc/shadow", file.path(installed, "shadow"))
        file.symlink("DESCRIPTION", file.path(installed, "description-link"))
        "done"`;
      expect(await value<string>(id, code, "admin")).to.equal("done");
      await close(id, "admin");
      const shared = readdirSync(join(library, "tpkgLinks"));
      expect(shared).to.include("description-link");
      expect(shared).to.not.include("shadow");
      expect(await helloIn("tpkgLinks", "user")).to.equal("links");
    });
  });

  describe("private", () => {
    before(() => serve("private"));

    it("keeps an administrator's install to the session", async () => {
      const id = await open("admin");
      expect(await value<string>(id, installScript("tpkgPrivate", "1.0.0", "private"), "admin")).to.equal("done");
      expect(await value<string>(id, "tpkgPrivate::hello()", "admin")).to.equal("private");
      await close(id, "admin");
      expect(readdirSync(library)).to.not.include("tpkgPrivate");
      expect(await helloIn("tpkgPrivate", "admin")).to.match(/^error: there is no package called/);
    });
  });

  describe("none", () => {
    before(() => serve("none"));

    it("refuses install.packages() with an error that names the setting, and gives sessions no library", async () => {
      const id = await open("admin");
      const refused = await evaluate(id, installScript("tpkgNone"), "admin");
      expect(refused.status).to.equal(400);
      expect(refused.text).to.include("packages.sessionInstalls is none");
      expect(await value<string>(id, ".libPaths()[1]", "admin")).to.not.match(/\/library$/);
      await close(id, "admin");
      expect(readdirSync(library)).to.not.include("tpkgNone");
    });
  });
});
