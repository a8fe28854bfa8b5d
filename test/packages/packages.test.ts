import { expect } from "chai";
import { readdir } from "node:fs/promises";
import { create, type DescMethod } from "@bufbuild/protobuf";
import { createHandlerContext } from "@connectrpc/connect";
import {
  GetPackageRequestSchema,
  GetPackageSettingsRequestSchema,
  InstallPackageRequestSchema,
  InstallPackageStreamRequestSchema,
  ListPackagesRequestSchema,
  ListPackagesResponseSchema,
  RemovePackageRequestSchema,
  RemovePackagesRequestSchema,
  RService,
  UpdatePackagesRequestSchema,
} from "../../gen/es/rock/r/v1/rservice_pb.js";
import { Fault } from "../../src/errors/fault.js";
import { PackageManager, type PackageManagerOptions } from "../../src/r/packages/index.js";
import { createPackageHandlers, type PackageHandlers } from "../../src/r/service/package-handlers.js";
import {
  GIT_ORGANIZATION,
  GIT_PACKAGE,
  createPackageWorld,
  inspectSerialized,
  processesMentioning,
  type PackageWorld,
} from "./fixtures.js";

function context(method: DescMethod, signal?: AbortSignal) {
  return createHandlerContext({
    service: RService,
    method,
    protocolName: "connect",
    requestMethod: "POST",
    url: `http://localhost/rock.r.v1.RService/${method.name}`,
    requestSignal: signal,
  });
}

async function rejection(promise: Promise<unknown>): Promise<Fault> {
  try {
    await promise;
  } catch (e) {
    if (e instanceof Fault) return e;
    throw e;
  }
  expect.fail("expected the operation to fail");
}

const M = RService.method;

describe("R packages (real R, local repositories)", function () {
  this.timeout(60_000);
  let world: PackageWorld;
  let manager: PackageManager;
  let handlers: PackageHandlers;
  let log: string[];

  /** A manager of the test world's library and sources, logging into `into`. */
  const managerOf = (into: string[], options: Partial<PackageManagerOptions> = {}) =>
    new PackageManager({
      rExecutable: "R",
      library: world.library,
      repos: [world.repoUrl],
      gitHost: world.gitHost,
      gitOrganization: world.gitOrganization,
      log: (text) => into.push(text),
      scratchDir: world.scratch,
      env: world.env,
      ...options,
    });

  before(async function () {
    this.timeout(120_000);
    world = await createPackageWorld();
    log = [];
    manager = managerOf(log);
    handlers = createPackageHandlers(manager);
  });

  after(async () => {
    if (!world) return;
    try {
      expect(await processesMentioning(world.scratch), "R processes left behind").to.deep.equal([]);
      expect(await readdir(world.scratch), "operation folders left behind").to.deep.equal([]);
    } finally {
      await world.dispose();
    }
  });

  describe("validation", () => {
    it("refuses bad names, refs and managers with InvalidArgument before any R starts", async () => {
      // An R that cannot start: reaching it would fail with Internal, not InvalidArgument.
      const ownLog: string[] = [];
      const blind = managerOf(ownLog, { rExecutable: "/nonexistent/R" });
      const h = createPackageHandlers(blind);
      const attempts: [string, Promise<unknown>][] = [
        [
          "spliced R",
          h.installPackage(create(InstallPackageRequestSchema, { name: "x');system('id" }), context(M.installPackage)) as Promise<unknown>,
        ],
        [
          "bad manager",
          h.installPackage(
            create(InstallPackageRequestSchema, { name: "dsTestA", manager: "pip" }),
            context(M.installPackage),
          ) as Promise<unknown>,
        ],
        [
          "option ref",
          h.installPackage(
            create(InstallPackageRequestSchema, { name: "pkg", manager: "git", ref: "--upload-pack=touch" }),
            context(M.installPackage),
          ) as Promise<unknown>,
        ],
        [
          "dotdot ref",
          h.installPackage(
            create(InstallPackageRequestSchema, { name: "org/pkg", manager: "g", ref: "a/../b" }),
            context(M.installPackage),
          ) as Promise<unknown>,
        ],
        [
          "deep git name",
          h.installPackage(
            create(InstallPackageRequestSchema, { name: "a/b/c", manager: "git" }),
            context(M.installPackage),
          ) as Promise<unknown>,
        ],
        ["path describe", h.getPackage(create(GetPackageRequestSchema, { name: "../etc" }), context(M.getPackage)) as Promise<unknown>],
        [
          "one bad of several",
          h.removePackages(
            create(RemovePackagesRequestSchema, { name: ["dsTestA,not valid"] }),
            context(M.removePackages),
          ) as Promise<unknown>,
        ],
        ["no names", h.removePackages(create(RemovePackagesRequestSchema, { name: [] }), context(M.removePackages)) as Promise<unknown>],
        [
          "bad single remove",
          h.removePackage(create(RemovePackageRequestSchema, { name: "rm -rf" }), context(M.removePackage)) as Promise<unknown>,
        ],
        ["bad describe", blind.describe("1abc")],
      ];
      for (const [what, attempt] of attempts) {
        const error = await rejection(attempt);
        expect(error.kind, `${what}: ${error.message}`).to.equal("invalid");
      }
      const streamed = h.installPackageStream(
        create(InstallPackageStreamRequestSchema, { name: "bad name", manager: "archive" }),
        context(M.installPackageStream),
      );
      const streamError = await rejection(
        (async () => {
          for await (const _ of streamed) expect.fail("no output expected");
        })(),
      );
      expect(streamError.kind).to.equal("invalid");
      expect(ownLog, "no R operation may have been logged").to.deep.equal([]);
      // The same manager does reach R for a valid request, so the refusals above were not luck.
      expect((await rejection(blind.describe("dsTestA"))).kind).to.equal("internal");
      expect(ownLog.join("")).to.include("[packages] describe dsTestA");
      // `ref` applies only to git (r-execution-service §4): the other managers ignore even one git would refuse.
      for (const manager of ["archive", "cran", "collection", "bioc"]) {
        const install = h.installPackage(
          create(InstallPackageRequestSchema, { name: "dsTestA", manager, ref: "--upload-pack=touch" }),
          context(M.installPackage),
        );
        const ignored = await rejection(Promise.resolve(install));
        expect(ignored.kind, `${manager}: ${ignored.message}`).to.equal("internal");
      }
    });
  });

  describe("install from the archive and read back", () => {
    it("installs from the archive through the handler: the version", async () => {
      const ctx = context(M.installPackage);
      const answer = await handlers.installPackage(create(InstallPackageRequestSchema, { name: "dsTestA" }), ctx);
      expect(answer.version).to.equal("1.0.0");
      const text = log.join("");
      expect(text).to.include("[packages] install dsTestA from archive");
      // R's own installer output reached the console log.
      expect(text).to.include("DONE (dsTestA)");
    });

    it("installs with the cran alias, streams R's lines to the caller, one install at a time", async () => {
      const lines: string[] = [];
      const [first, second] = await Promise.all([
        manager.install({ name: "dsTestB", manager: "cran" }, { onLine: (line) => lines.push(line) }),
        manager.install({ name: "plainPkg", manager: "archive" }),
      ]);
      expect(first).to.deep.equal({ name: "dsTestB", version: "1.0.0" });
      expect(second).to.deep.equal({ name: "plainPkg", version: "1.0.0" });
      expect(lines.some((line) => line.includes("DONE (dsTestB)"))).to.equal(true);
      expect(
        lines.some((line) => line.includes("plainPkg")),
        "only this call's lines",
      ).to.equal(false);
      // Serialized: the second R only started once the first had finished.
      const text = log.join("");
      expect(text.indexOf("[packages] install plainPkg")).to.be.greaterThan(text.indexOf("[packages] done: install dsTestB"));
    });

    it("describes a package as JSON and as R serialization; unknown is NotFound", async () => {
      const json = await handlers.getPackage(
        create(GetPackageRequestSchema, { name: "dsTestA", accept: "application/json" }),
        context(M.getPackage),
      );
      expect(json.answer?.case).to.equal("description");
      const description = json.answer?.value as Record<string, unknown>;
      expect(description).to.include({ name: "dsTestA", Package: "dsTestA", Version: "1.0.0", Title: "Test Package dsTestA" });
      expect(description.AssignMethods).to.equal("asFactorDS, cbindDS");

      const rds = await handlers.getPackage(
        create(GetPackageRequestSchema, { name: "dsTestA", accept: "application/octet-stream, application/json" }),
        context(M.getPackage),
      );
      expect(rds.answer?.case).to.equal("serialized");
      if (rds.answer?.case !== "serialized") return;
      expect(rds.answer.value.contentType).to.equal("application/octet-stream");
      const printed = await inspectSerialized(
        world,
        rds.answer.value.data ?? new Uint8Array(),
        'cat(is.list(x), x$name, x$Version, x$Maintainer, sep = "|")',
      );
      expect(printed).to.equal("TRUE|dsTestA|1.0.0|Test <test@example.org>");

      const missing = await rejection(
        handlers.getPackage(create(GetPackageRequestSchema, { name: "noSuchPkg" }), context(M.getPackage)) as Promise<unknown>,
      );
      expect(missing.kind).to.equal("not_found");
      expect(missing.message).to.equal("No such R package: noSuchPkg");
    });

    it("lists installed packages as a 24-column matrix (NA as null) and as R serialization", async () => {
      const json = create(
        ListPackagesResponseSchema,
        await handlers.listPackages(create(ListPackagesRequestSchema, { accept: "*/*" }), context(M.listPackages)),
      );
      expect(json.answer?.case).to.equal("matrix");
      if (json.answer?.case !== "matrix") return;
      const matrix = json.answer.value;
      expect(matrix.columnNames).to.have.length(24);
      expect(matrix.columnNames.slice(0, 3)).to.deep.equal(["Package", "LibPath", "Version"]);
      expect(matrix.columnNames.slice(-8)).to.deep.equal([
        "Title",
        "Description",
        "Author",
        "Maintainer",
        "Date/Publication",
        "AggregateMethods",
        "AssignMethods",
        "Options",
      ]);
      const index = matrix.rowNames.indexOf("dsTestA");
      expect(index).to.be.at.least(0);
      expect(matrix.rowNames).to.include.members(["dsTestB", "plainPkg", "jsonlite"]);
      const row = matrix.rows[index].values.map((value) =>
        value.kind.case === "stringValue" ? value.kind.value : value.kind.case === "nullValue" ? null : `unexpected ${value.kind.case}`,
      );
      const cell = (column: string) => row[matrix.columnNames.indexOf(column)];
      expect(row).to.have.length(24);
      expect(cell("LibPath")).to.equal(world.library);
      expect(cell("Version")).to.equal("1.0.0");
      expect(cell("Options")).to.equal("datashield.privacyLevel=5");
      expect(cell("Date/Publication")).to.equal(null);

      const rds = await handlers.listPackages(
        create(ListPackagesRequestSchema, { accept: "application/octet-stream" }),
        context(M.listPackages),
      );
      expect(rds.answer?.case).to.equal("serialized");
      if (rds.answer?.case !== "serialized") return;
      const printed = await inspectSerialized(
        world,
        rds.answer.value.data ?? new Uint8Array(),
        'cat(is.matrix(x), ncol(x), x["dsTestB", "Version"], x["dsTestA", "Options"], is.na(x["dsTestA", "Date/Publication"]), sep = "|")',
      );
      expect(printed).to.equal("TRUE|24|1.0.0|datashield.privacyLevel=5|TRUE");
    });

    it("reads analysis package settings from DESCRIPTION and the DATASHIELD file, as JSON and RDS", async () => {
      const json = await handlers.getPackageSettings(create(GetPackageSettingsRequestSchema, {}), context(M.getPackageSettings));
      expect(json.answer?.case).to.equal("settings");
      const settings = json.answer?.value as Record<string, unknown>;
      expect(settings.dsTestA).to.deep.equal({
        AggregateMethods: ["meanDS", "lengthDS=base::length"],
        AssignMethods: ["asFactorDS", "cbindDS"],
        Options: ["datashield.privacyLevel=5"],
      });
      expect(settings.dsTestB).to.deep.equal({
        AggregateMethods: ["summaryDS", "tableDS"],
        AssignMethods: ["dataFrameDS"],
        Options: ["ds.b.option=TRUE"],
      });
      expect(settings).not.to.have.property("plainPkg");
      expect(settings).not.to.have.property("jsonlite");

      const rds = await handlers.getPackageSettings(
        create(GetPackageSettingsRequestSchema, { accept: "application/octet-stream" }),
        context(M.getPackageSettings),
      );
      if (rds.answer?.case !== "serialized") expect.fail("serialized settings expected");
      const printed = await inspectSerialized(
        world,
        rds.answer.value.data ?? new Uint8Array(),
        'cat(paste(x$dsTestB$AggregateMethods, collapse = ","), x$dsTestA$Options, is.null(x$plainPkg), sep = "|")',
      );
      expect(printed).to.equal("summaryDS,tableDS|datashield.privacyLevel=5|TRUE");
    });
  });

  describe("install from git", () => {
    it("installs a bare name from the default organisation at master", async () => {
      const installed = await manager.install({ name: GIT_PACKAGE, manager: "git" });
      expect(installed).to.deep.equal({ name: GIT_PACKAGE, version: "1.0.0" });
    });

    it("streams the install of org/repo at a tag, then the installed version", async () => {
      const ctx = context(M.installPackageStream);
      const events: { case: string; value: string }[] = [];
      for await (const message of handlers.installPackageStream(
        create(InstallPackageStreamRequestSchema, { name: `${GIT_ORGANIZATION}/${GIT_PACKAGE}`, manager: "g", ref: "v2" }),
        ctx,
      )) {
        const event = message.event;
        if (event?.case === "line" || event?.case === "installedVersion") events.push({ case: event.case, value: event.value });
      }
      expect(events.length).to.be.greaterThan(2);
      expect(events.at(-1)).to.deep.equal({ case: "installedVersion", value: "2.0.0" });
      expect(events.slice(0, -1).every((event) => event.case === "line")).to.equal(true);
      expect(events.some((event) => event.value.includes(`DONE (${GIT_PACKAGE})`))).to.equal(true);
      expect((await manager.describe(GIT_PACKAGE)).Version).to.equal("2.0.0");
    });

    it("fails with R's message on an unknown ref", async () => {
      const error = await rejection(manager.install({ name: GIT_PACKAGE, manager: "git", ref: "v9" }));
      expect(error.kind).to.equal("internal");
      expect(error.message).to.include(`Package '${GIT_ORGANIZATION}/${GIT_PACKAGE}' could not be installed from git`);
      // remotes swallows the git error itself; the warning of the failed git command remains.
      expect(error.message).to.match(/fetch origin v9.* had status 128/);
      // Still the version the previous install left.
      expect((await manager.describe(GIT_PACKAGE)).Version).to.equal("2.0.0");
    });
  });

  describe("failures", () => {
    it("reports a package the archive does not have as an error carrying R's message", async () => {
      const error = await rejection(
        handlers.installPackage(
          create(InstallPackageRequestSchema, { name: "noSuchPkg", manager: "archive" }),
          context(M.installPackage),
        ) as Promise<unknown>,
      );
      expect(error.kind).to.equal("internal");
      expect(error.message).to.match(
        /^Package 'noSuchPkg' could not be installed from the package archive: .*noSuchPkg.* is not available/s,
      );
    });

    it("reports a package that fails to install as an error, not as success", async () => {
      const error = await rejection(manager.install({ name: "brokenPkg" }));
      expect(error.kind).to.equal("internal");
      expect(error.message).to.match(
        /^Package 'brokenPkg' could not be installed from the package archive: .*installation of package .*brokenPkg.* had non-zero exit status/s,
      );
      expect((await rejection(manager.describe("brokenPkg"))).kind).to.equal("not_found");
    });

    it("streams every line R printed of a failing install, then its error", async () => {
      const lines: string[] = [];
      const error = await rejection(
        (async () => {
          for await (const message of handlers.installPackageStream(
            create(InstallPackageStreamRequestSchema, { name: "brokenPkg" }),
            context(M.installPackageStream),
          )) {
            if (message.event?.case === "installedVersion") expect.fail("a failed install has no version");
            if (message.event?.case === "line") lines.push(message.event.value);
          }
        })(),
      );
      expect(error.kind).to.equal("internal");
      expect(error.message).to.match(/^Package 'brokenPkg' could not be installed/);
      // From R's first line to its last warning: every line reached the stream before the error did.
      expect(lines[0]).to.match(/^\* installing \*source\* package .brokenPkg./);
      expect(lines).to.include("ERROR: unable to collate and parse R files for package ‘brokenPkg’");
      expect(lines.at(-1)).to.match(/installation of package .brokenPkg. had non-zero exit status/);
    });

    it("answers a clear error when the collection cannot be reached", async () => {
      const error = await rejection(manager.install({ name: "Biobase", manager: "coll" }));
      expect(error.kind).to.equal("internal");
      expect(error.message).to.include("Package 'Biobase' could not be installed from the collection: ");
      expect(error.message).to.match(/Bioconductor/);
    });

    it("kills R and everything it started when the streaming caller goes away", async () => {
      const controller = new AbortController();
      const ctx = context(M.installPackageStream, controller.signal);
      const stream = handlers.installPackageStream(create(InstallPackageStreamRequestSchema, { name: "slowPkg" }), ctx);
      let waiting = false;
      const started = Date.now();
      const ended = await (async () => {
        for await (const message of stream) {
          if (message.event?.case === "installedVersion") expect.fail("the install should not have finished");
          // The configure script, a grandchild of R, is now sleeping.
          if (message.event?.case === "line" && message.event.value.includes("slowPkg is waiting") && !waiting) {
            waiting = true;
            expect((await processesMentioning(world.scratch)).length).to.be.greaterThan(1);
            controller.abort();
          }
        }
      })().then(
        () => "completed",
        (e: unknown) => e,
      );
      expect(waiting).to.equal(true);
      // The stream ends with the reason its caller left for (Connect answers an AbortError CANCELLED).
      expect(ended).to.equal(controller.signal.reason);
      expect(Date.now() - started).to.be.lessThan(20_000);
      expect(await processesMentioning(world.scratch)).to.deep.equal([]);
      expect(await readdir(world.scratch)).to.deep.equal([]);
      expect((await rejection(manager.describe("slowPkg"))).kind).to.equal("not_found");
      expect(log.join("")).to.include("[packages] cancelled: install slowPkg from archive");
      // R CMD INSTALL's lock would fail every later install of the package.
      expect((await readdir(world.library)).filter((name) => name.startsWith("00LOCK"))).to.deep.equal([]);
    });
  });

  describe("time limit", () => {
    it("stops an install that runs past packages.timeoutSeconds, with R and everything it started", async () => {
      const ownLog: string[] = [];
      const limited = managerOf(ownLog, { timeoutSeconds: 3 });
      const started = Date.now();
      const error = await rejection(limited.install({ name: "slowPkg" }));
      expect(error.message).to.equal("The package operation did not end within 3 s and was stopped");
      expect(error.kind).to.equal("deadline");
      expect(Date.now() - started).to.be.within(3000, 20_000);
      expect(ownLog.join("")).to.include("slowPkg is waiting");
      expect(ownLog.join("")).to.include("[packages] timed out after 3 s: install slowPkg from archive");
      expect(await processesMentioning(world.scratch)).to.deep.equal([]);
      expect(await readdir(world.scratch)).to.deep.equal([]);
      expect((await readdir(world.library)).filter((name) => name.startsWith("00LOCK"))).to.deep.equal([]);
      expect((await rejection(manager.describe("slowPkg"))).kind).to.equal("not_found");
    });
  });

  describe("update and remove", () => {
    it("updates to a newer version from the repository", async () => {
      await world.publish("dsTestA", "1.1.0");
      const ctx = context(M.updatePackages);
      await handlers.updatePackages(create(UpdatePackagesRequestSchema, {}), ctx);
      expect((await manager.describe("dsTestA")).Version).to.equal("1.1.0");
      // Untouched: the repository has no newer version of it.
      expect((await manager.describe("dsTestB")).Version).to.equal("1.0.0");
    });

    it("streams an update: R's lines, then an empty installed version", async () => {
      await world.publish("dsTestA", "1.2.0");
      const events: { case: string; value: string }[] = [];
      for await (const message of handlers.installPackageStream(
        create(InstallPackageStreamRequestSchema, { update: true }),
        context(M.installPackageStream),
      )) {
        const event = message.event;
        if (event?.case === "line" || event?.case === "installedVersion") events.push({ case: event.case, value: event.value });
      }
      expect(events.at(-1)).to.deep.equal({ case: "installedVersion", value: "" });
      expect(events.some((event) => event.case === "line" && event.value.includes("DONE (dsTestA)"))).to.equal(true);
      expect((await manager.describe("dsTestA")).Version).to.equal("1.2.0");
    });

    it("removes one package, then NotFound", async () => {
      const ctx = context(M.removePackage);
      await handlers.removePackage(create(RemovePackageRequestSchema, { name: "plainPkg" }), ctx);
      expect((await rejection(manager.describe("plainPkg"))).kind).to.equal("not_found");
    });

    it("removes several (repeated and comma separated), skipping ones not installed", async () => {
      const ctx = context(M.removePackages);
      await handlers.removePackages(create(RemovePackagesRequestSchema, { name: [`dsTestB, ${GIT_PACKAGE}`, "notInstalled"] }), ctx);
      const installed = (await manager.list()).rowNames;
      expect(installed).to.include("dsTestA");
      expect(installed).not.to.include.members(["dsTestB"]);
      expect(installed).not.to.include(GIT_PACKAGE);
      expect(await manager.remove(["dsTestA", "plainPkg"])).to.deep.equal({ removed: ["dsTestA"], missing: ["plainPkg"] });
      const settings = await manager.settings();
      expect(settings).not.to.have.property("dsTestA");
      expect(settings).not.to.have.property("dsTestB");
    });
  });
});
