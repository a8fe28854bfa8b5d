import { expect } from "chai";
import type * as grpcJs from "@grpc/grpc-js";
import { startTestServer, type TestServer } from "../support/server.js";
import { rest, grpcClients, metadataFor, call } from "../support/clients.js";
import { createPackageWorld, inspectSerialized, type PackageWorld } from "./fixtures.js";
import type { InstallPackageStreamResponse, ListPackagesResponse, UpdatePackagesResponse } from "../../gen/grpc-js/rock/r/v1/rservice.js";

const octet = { accept: "application/octet-stream, application/json" };

/** Every message of a grpc-js server stream, or its error. */
function collect<T>(stream: grpcJs.ClientReadableStream<T>): Promise<T[]> {
  return new Promise((resolve, reject) => {
    const items: T[] = [];
    stream.on("data", (m: T) => items.push(m));
    stream.on("error", reject);
    stream.on("end", () => resolve(items));
  });
}

describe("R packages through REST and gRPC", function () {
  this.timeout(180_000);
  let world: PackageWorld;
  let server: TestServer;
  let grpc: ReturnType<typeof grpcClients>;

  before(async function () {
    this.timeout(300_000);
    world = await createPackageWorld();
    server = await startTestServer({
      packages: { repos: [world.repoUrl], library: world.library, gitHost: world.gitHost, gitOrganization: world.gitOrganization },
    });
    grpc = grpcClients(server.port);
  });
  after(async () => {
    grpc?.close();
    await server?.stop();
    await world?.dispose();
  });

  it("installs from the archive over REST: 204, then listed and described", async () => {
    const res = await rest(server.url, "POST", "/rserver/packages?name=dsTestA", { user: "manager" });
    expect(res.status, res.text).to.equal(204);
    const list = await rest(server.url, "GET", "/rserver/packages", { user: "manager" });
    expect(list.status).to.equal(200);
    const matrix = list.json<{ rowNames: string[]; columnNames: string[]; rows: (string | null)[][] }>();
    expect(matrix.rowNames).to.include("dsTestA");
    expect(matrix.columnNames).to.have.length(24);
    const row = matrix.rows[matrix.rowNames.indexOf("dsTestA")]!;
    expect(row[matrix.columnNames.indexOf("Version")]).to.equal("1.0.0");
    const desc = await rest(server.url, "GET", "/rserver/package/dsTestA", { user: "admin" });
    expect(desc.json<Record<string, string>>()).to.include({ name: "dsTestA", Package: "dsTestA", Version: "1.0.0" });
  });

  it("answers R serialization when octet-stream comes first", async () => {
    const res = await rest(server.url, "GET", "/rserver/packages", { user: "manager", headers: octet });
    expect(res.headers.get("content-type")).to.equal("application/octet-stream");
    expect(await inspectSerialized(world, res.bytes, 'cat(x["dsTestA", "Version"])')).to.equal("1.0.0");
  });

  it("answers the analysis-package settings at _stats and _datashield", async () => {
    for (const p of ["/rserver/packages/_stats", "/rserver/packages/_datashield"]) {
      const res = await rest(server.url, "GET", p, { user: "manager" });
      const settings = res.json<Record<string, Record<string, string[]>>>();
      expect(settings.dsTestA?.AssignMethods).to.deep.equal(["asFactorDS", "cbindDS"]);
    }
  });

  it("streams the installation from git over gRPC, ending with the installed version", async () => {
    const events = await collect(
      grpc.r.installPackageStream({ name: "gitPkg", manager: "git", ref: "v2", update: false }, metadataFor("manager")),
    );
    const last = events[events.length - 1] as InstallPackageStreamResponse;
    expect(last.installedVersion).to.equal("2.0.0");
    expect(events.filter((e) => e.line !== undefined).length).to.be.greaterThan(0);
    const list = await call<ListPackagesResponse>((cb) => grpc.r.listPackages({ accept: "" }, metadataFor("admin"), cb));
    expect(list.matrix?.rowNames).to.include("gitPkg");
  });

  it("writes the installation output into the console log", async () => {
    const log = await rest(server.url, "GET", "/rserver/_log?limit=1000", { user: "admin", headers: { accept: "text/plain" } });
    expect(log.headers.get("content-type")).to.match(/^text\/plain/);
    expect(log.text).to.include("gitPkg");
  });

  it("refuses invalid names and refs with 400 and a failed install with R's message", async () => {
    const bad = await rest(server.url, "POST", `/rserver/packages?name=${encodeURIComponent("x'); system('id")}`, { user: "manager" });
    expect(bad.status).to.equal(400);
    expect(bad.json<{ message: string }>().message).to.match(/Invalid R package name/);
    const badRef = await rest(server.url, "POST", "/rserver/packages?name=gitPkg&manager=git&ref=--upload-pack%3Dx", { user: "manager" });
    expect(badRef.status).to.equal(400);
    const missing = await rest(server.url, "POST", "/rserver/packages?name=noSuchPkg", { user: "manager" });
    expect(missing.status).to.equal(500);
    expect(missing.json<{ message: string }>().message).to.include("noSuchPkg");
    const unknown = await rest(server.url, "GET", "/rserver/package/noSuchPkg", { user: "manager" });
    expect(unknown.status).to.equal(404);
  });

  it("lets managers and administrators manage packages, not users", async () => {
    expect((await rest(server.url, "GET", "/rserver/packages", { user: "user" })).status).to.equal(403);
    expect((await rest(server.url, "POST", "/rserver/packages?name=plainPkg", { user: "user" })).status).to.equal(403);
    const code = await new Promise<number>((resolve) =>
      grpc.r.listPackages({ accept: "" }, metadataFor("user"), (err) => resolve(err?.code ?? 0)),
    );
    expect(code).to.equal(7);
  });

  it("updates every package (PUT /rserver/packages): 200 naming what it updated; gRPC OK", async () => {
    await world.publish("dsTestA", "1.1.0");
    const res = await rest(server.url, "PUT", "/rserver/packages", { user: "manager" });
    expect(res.status, res.text).to.equal(200);
    expect(res.headers.get("content-type")).to.equal("application/json");
    expect(res.json()).to.deep.equal({ updated: ["dsTestA"], failed: [] });
    const desc = await rest(server.url, "GET", "/rserver/package/dsTestA", { user: "admin" });
    expect(desc.json<Record<string, string>>()).to.include({ Version: "1.1.0" });
    const again = await call<UpdatePackagesResponse>((cb) => grpc.r.updatePackages({}, metadataFor("admin"), cb));
    expect(again).to.deep.equal({ updated: [], failed: [] });
  });

  it("answers an update where one package fails to build as Rock, 200, naming it in the body and the console log, the others updated", async () => {
    expect((await rest(server.url, "POST", "/rserver/packages?name=dsTestB", { user: "manager" })).status).to.equal(204);
    await world.publish("dsTestB", "1.1.0", { broken: true });
    await world.publish("dsTestA", "1.2.0");
    const res = await rest(server.url, "PUT", "/rserver/packages", { user: "manager" });
    expect(res.status, res.text).to.equal(200);
    expect(res.json()).to.deep.equal({ updated: ["dsTestA"], failed: ["dsTestB"] });
    const version = async (name: string) =>
      (await rest(server.url, "GET", `/rserver/package/${name}`, { user: "admin" })).json<{ Version: string }>().Version;
    expect(await version("dsTestA")).to.equal("1.2.0");
    expect(await version("dsTestB"), "the failed package keeps its version").to.equal("1.0.0");
    const log = await rest(server.url, "GET", "/rserver/_log?limit=1000", { user: "admin", headers: { accept: "text/plain" } });
    expect(log.text).to.include("Packages that could not be updated: dsTestB");
  });

  it("reads packages while the R server is stopped (each read runs in an R of its own), over REST and gRPC", async () => {
    const stopped = await rest(server.url, "DELETE", "/rserver", { user: "admin" });
    expect(stopped.json<{ running: boolean }>().running).to.equal(false);
    for (const path of ["/rserver/packages", "/rserver/package/dsTestA", "/rserver/packages/_stats", "/rserver/packages/_datashield"]) {
      for (const accept of ["application/json", octet.accept]) {
        const res = await rest(server.url, "GET", path, { user: "manager", headers: { accept } });
        expect(res.status, `${path} (${accept}): ${res.text}`).to.equal(200);
      }
    }
    const list = await call<ListPackagesResponse>((cb) => grpc.r.listPackages({ accept: "" }, metadataFor("admin"), cb));
    expect(list.matrix?.rowNames).to.include("dsTestA");
    expect((await rest(server.url, "GET", "/rserver", { user: "admin" })).json<{ running: boolean }>().running).to.equal(false);
  });

  it("removes one (DELETE /rserver/package/{name}) and several (name=a%2Cb)", async () => {
    expect((await rest(server.url, "POST", "/rserver/packages?name=plainPkg", { user: "admin" })).status).to.equal(204);
    expect((await rest(server.url, "DELETE", "/rserver/package/plainPkg", { user: "admin" })).status).to.equal(204);
    expect((await rest(server.url, "DELETE", "/rserver/packages?name=dsTestA%2CgitPkg", { user: "admin" })).status).to.equal(204);
    const list = await rest(server.url, "GET", "/rserver/packages", { user: "admin" });
    expect(list.json<{ rowNames: string[] }>().rowNames).not.to.include.any.members(["plainPkg", "dsTestA", "gitPkg"]);
  });
});
