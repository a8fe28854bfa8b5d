/**
 * OBiBa Opal's calls to Rock, replayed from its sources (GitHub obiba/opal, module opal-r, package
 * org.obiba.opal.r.rock, and the operations that call it): each request with the method, path, query,
 * headers and body encoding its Java code sends, each answer read as strictly as Opal reads it. Opal's
 * RestTemplates are Spring's defaults: HttpURLConnection (SimpleClientHttpRequestFactory: chunks of 4096
 * bytes when the length is unknown), except the session's opening (HttpComponentsClientHttpRequestFactory,
 * Apache HttpClient 5); Strings are written by StringHttpMessageConverter, in ISO-8859-1 when the
 * Content-Type names no charset. Which file each step comes from: docs/compatibility.md.
 */
import { expect } from "chai";
import { copyFile, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import os from "node:os";
import { join } from "node:path";
import { createPackageWorld, inspectSerialized, type PackageWorld } from "../packages/fixtures.js";
import { startTestServer, type TestServer } from "../support/server.js";
import {
  APACHE_CLIENT,
  JAVA_USER_AGENT,
  SPRING_ACCEPT,
  SPRING_ACCEPT_WITH_XML,
  basicAuthorization,
  buildPackage,
  chunked,
  expectRockSessionInfo,
  indexRepository,
  latin1,
  mediaType,
  serveFolder,
  springMultipart,
  type Exchange,
  Wire,
} from "./java-clients.js";

/** Opal's RestTemplate without a request factory: HttpURLConnection, which names itself and sends what Spring set. */
const java = (user: string | undefined, headers: Record<string, string>): Record<string, string> => ({
  "User-Agent": JAVA_USER_AGENT,
  ...headers,
  ...(user ? { Authorization: basicAuthorization(user) } : {}),
});

const is2xx = (answer: Exchange): boolean => answer.status >= 200 && answer.status < 300;

/** RockService and RockSession, one request per Java method, against one server. */
class Opal {
  constructor(private readonly wire: Wire) {}

  // RockServerDiscoveryService.discoverHost / checkHost: RestTemplate#getForEntity, no credentials.
  info(): Promise<Exchange> {
    return this.wire.send("GET", "/_info", java(undefined, { Accept: SPRING_ACCEPT.string }));
  }
  check(): Promise<Exchange> {
    return this.wire.send("GET", "/_check", java(undefined, { Accept: SPRING_ACCEPT.bean }));
  }

  // RockService: the manager's credentials (the administrator's when Opal has none for a manager).
  state(user: string): Promise<Exchange> {
    return this.wire.send("GET", "/rserver", java(user, { Accept: SPRING_ACCEPT.bean }));
  }
  start(user: string): Promise<Exchange> {
    return this.wire.send("PUT", "/rserver", java(user, { Accept: SPRING_ACCEPT.bean }));
  }
  stop(user: string): Promise<Exchange> {
    return this.wire.send("DELETE", "/rserver", java(user, { Accept: SPRING_ACCEPT.bean }));
  }
  log(user: string, lines: number): Promise<Exchange> {
    return this.wire.send("GET", `/rserver/_log?limit=${lines}`, java(user, { Accept: "text/plain" }));
  }
  packages(user: string): Promise<Exchange> {
    return this.wire.send("GET", "/rserver/packages", java(user, { Accept: SPRING_ACCEPT.bean }));
  }
  package(user: string, name: string): Promise<Exchange> {
    return this.wire.send("GET", `/rserver/package/${name}`, java(user, { Accept: "application/json" }));
  }
  datashield(user: string): Promise<Exchange> {
    return this.wire.send("GET", "/rserver/packages/_datashield", java(user, { Accept: "application/json" }));
  }
  /** installCRANPackage: Content-Type application/json and no body, the parameters in the query. */
  install(user: string, name: string): Promise<Exchange> {
    return this.wire.send(
      "POST",
      `/rserver/packages?name=${name}&manager=cran`,
      java(user, { Accept: SPRING_ACCEPT.bean, "Content-Type": "application/json" }),
    );
  }
  remove(user: string, name: string): Promise<Exchange> {
    return this.wire.send("DELETE", `/rserver/package/${name}`, java(user, { Accept: SPRING_ACCEPT.bean }));
  }
  updateAll(user: string): Promise<Exchange> {
    return this.wire.send("PUT", "/rserver/packages", java(user, { Accept: SPRING_ACCEPT.bean }));
  }

  // RockSession: the user's credentials (the administrator's when Opal has none for a user).
  /** openSession: Apache HttpClient, read into RockSessionInfo by Jackson. */
  open(user: string, accept: string = SPRING_ACCEPT.bean): Promise<Exchange> {
    return this.wire.send("POST", "/r/sessions", { ...APACHE_CLIENT, Accept: accept, Authorization: basicAuthorization(user) });
  }
  /** eval with RSerialize.NATIVE (JSON) or RAW (R serialization), the script a Java String. */
  eval(user: string, id: string, script: string | Buffer, serialized: boolean): Promise<Exchange> {
    const body = Buffer.isBuffer(script) ? script : latin1(script);
    const accept = serialized ? "application/octet-stream, application/json" : "application/json";
    return this.wire.send(
      "POST",
      `/r/session/${id}/_eval`,
      java(user, { Accept: accept, "Content-Type": "application/x-rscript", "Content-Length": String(body.length) }),
      body,
    );
  }
  assign(
    user: string,
    id: string,
    symbol: string,
    type: "application/x-rdata" | "application/x-rscript",
    content: string | Buffer,
  ): Promise<Exchange> {
    const body = Buffer.isBuffer(content) ? content : latin1(content);
    return this.wire.send(
      "POST",
      `/r/session/${id}/_assign?s=${symbol}`,
      java(user, { Accept: "application/json", "Content-Type": type, "Content-Length": String(body.length) }),
      body,
    );
  }
  /** writeFile: multipart of an InputStreamResource of unknown length, so chunked; postForEntity(String.class). */
  upload(user: string, id: string, fileName: string, content: Buffer, partType: string): Promise<Exchange> {
    const { contentType, body } = springMultipart(fileName, content, partType);
    return this.wire.send(
      "POST",
      `/r/session/${id}/_upload?path=${fileName}&overwrite=true`,
      java(user, { Accept: SPRING_ACCEPT.string, "Content-Type": contentType }),
      chunked(body, 4096),
    );
  }
  download(user: string, id: string, fileName: string): Promise<Exchange> {
    return this.wire.send("GET", `/r/session/${id}/_download?path=${fileName}`, java(user, { Accept: "*/*" }));
  }
  close(user: string, id: string): Promise<Exchange> {
    return this.wire.send("DELETE", `/r/session/${id}`, java(user, { Accept: SPRING_ACCEPT.bean }));
  }

  async session(user: string): Promise<string> {
    const opened = await this.open(user);
    expect(opened.status, opened.body.toString()).to.equal(201);
    return expectRockSessionInfo(opened);
  }
  /** An evaluation Opal reads as JSON (RockResult over org.json): the parsed value. */
  async value<T>(user: string, id: string, script: string): Promise<T> {
    const answer = await this.eval(user, id, script, false);
    expect(answer.status, answer.body.toString()).to.equal(200);
    expect(mediaType(answer.contentType())).to.equal("application/json");
    return JSON.parse(answer.springString()) as T;
  }
}

/** jsonlite::base64_enc, as opalr encodes a serialization: lines of 72 characters joined by "\n". */
const opalrBase64 = (bytes: Buffer): string => bytes.toString("base64").replace(/.{72}(?=.)/g, "$&\n");

/** AbstractROperation.ensurePackage, as Opal formats it (its repositories replaced by the test's). */
const ensurePackage = (name: string, repos: string): string =>
  `if (!require(${name})) { install.packages('${name}', repos=c('${repos}'), dependencies=TRUE) }`;

describe("Opal's calls to Rock (obiba/opal opal-r), replayed", function () {
  this.timeout(120_000);
  let world: PackageWorld;
  let repository: Awaited<ReturnType<typeof serveFolder>>;
  let server: TestServer;
  let wire: Wire;
  let opal: Opal;

  before(async function () {
    this.timeout(300_000);
    world = await createPackageWorld();
    repository = await serveFolder(join(world.root, "repo"));
    // Over HTTP, as CRAN: a confined session sees neither the host's /tmp nor its files.
    server = await startTestServer({ r: { startOnBoot: true }, packages: { repos: [repository.url], library: world.library } });
    wire = new Wire(server.port);
    opal = new Opal(wire);
  });
  after(async () => {
    wire?.close();
    await server?.stop();
    await repository?.close();
    await world?.dispose();
  });

  it("discovers the server without credentials: GET /_info read by org.json, then GET /_check (RockServerDiscoveryService)", async () => {
    const info = await opal.info();
    expect(info.status).to.equal(200);
    const app = JSON.parse(info.springString()) as Record<string, unknown>;
    expect(app.type).to.equal("rock");
    expect(app.id).to.be.a("string");
    expect(app.cluster).to.be.a("string");
    if (app.tags !== undefined)
      expect(app.tags)
        .to.be.an("array")
        .that.satisfies((t: unknown[]) => t.every((x) => typeof x === "string"));
    if (app.server !== undefined) expect(app.server).to.be.a("string");
    const check = await opal.check();
    expect(is2xx(check), `GET /_check answered ${check.status}`).to.equal(true);
  });

  it("reads the R server's state as RockServerStatus, its counts cast to Integer (RockService.getState, RockState)", async () => {
    const state = await opal.state("admin");
    expect(state.status).to.equal(200);
    expect(mediaType(state.contentType())).to.equal("application/json");
    const status = state.json<Record<string, unknown> & { sessions: Record<string, unknown>; system: Record<string, unknown> }>();
    expect(status.running).to.equal(true);
    for (const key of ["id", "cluster", "version", "encoding"]) expect(status[key], key).to.be.a("string");
    expect(status.tags).to.be.an("array");
    // RockState casts these to Integer: Jackson makes an Integer only of a JSON integer within 32 bits.
    for (const value of [status.sessions.total, status.sessions.busy, status.system.cores, status.system.freeMemory]) {
      expect(Number.isInteger(value) && (value as number) <= 2 ** 31 - 1 && (value as number) >= -(2 ** 31), String(value)).to.equal(true);
    }
  });

  it("installs, lists, describes and reads the DataSHIELD settings of a package through the API (RockService)", async () => {
    const installed = await opal.install("admin", "dsTestA");
    expect(is2xx(installed), `${installed.status} ${installed.body.toString()}`).to.equal(true);

    // getInstalledPackagesDtos: Jackson into RockStringMatrix (lists of strings).
    const list = await opal.packages("admin");
    expect(list.status).to.equal(200);
    expect(mediaType(list.contentType())).to.equal("application/json");
    const matrix = list.json<{ rowNames: unknown[]; columnNames: unknown[]; rows: unknown[][] }>();
    expect(matrix.rowNames).to.include("dsTestA");
    expect(matrix.columnNames.every((c) => typeof c === "string")).to.equal(true);
    expect(
      matrix.rows.every((row) => row.length === matrix.columnNames.length && row.every((v) => v === null || typeof v === "string")),
    ).to.equal(true);

    // getInstalledPackageDto: every value read with asStrings()[0], `name` taken apart.
    const described = await opal.package("admin", "dsTestA");
    expect(described.status).to.equal(200);
    const description = JSON.parse(described.springString()) as Record<string, unknown>;
    expect(description.name).to.equal("dsTestA");
    expect(description.Version).to.equal("1.0.0");
    for (const [key, value] of Object.entries(description)) {
      const first = Array.isArray(value) ? value[0] : value;
      expect(first, `${key} has a first string value`).to.be.a("string");
    }

    // getDataShieldPackagesProperties: a named list per package, each property's strings joined with ", ".
    const datashield = await opal.datashield("admin");
    expect(datashield.status).to.equal(200);
    const settings = JSON.parse(datashield.springString()) as Record<string, Record<string, unknown>>;
    const joined = (value: unknown) => (Array.isArray(value) ? value.join(", ") : String(value));
    expect(joined(settings.dsTestA?.AssignMethods)).to.equal("asFactorDS, cbindDS");
    for (const properties of Object.values(settings)) {
      for (const value of Object.values(properties)) expect(Array.isArray(value) || typeof value === "string").to.equal(true);
    }
  });

  it("runs a session's life as RockSession does: open, eval as JSON and R serialization, assign x-rdata and x-rscript, upload, download, close", async () => {
    const id = await opal.session("admin");

    const json = await opal.eval("admin", id, 'list(a = 1, b = "x")', false);
    expect(json.status).to.equal(200);
    expect(mediaType(json.contentType())).to.equal("application/json");
    expect(JSON.parse(json.springString())).to.deep.equal({ a: 1, b: "x" });

    const raw = await opal.eval("admin", id, 'list(a = 1, b = "x")', true);
    expect(raw.status).to.equal(200);
    expect(mediaType(raw.contentType())).to.equal("application/octet-stream");
    expect(await inspectSerialized(world, raw.body, 'cat(identical(x, list(a = 1, b = "x")))')).to.equal("TRUE");

    // DataAssignROperation: what opalr's opal.assign.data sends Opal, passed on as a String.
    const data = await opal.assign("admin", id, "d", "application/x-rdata", opalrBase64(raw.body));
    expect(is2xx(data), `${data.status} ${data.body.toString()}`).to.equal(true);
    // StringAssignROperation: an R expression.
    const script = await opal.assign("admin", id, "y", "application/x-rscript", "c(1, 2, 3)");
    expect(is2xx(script), `${script.status} ${script.body.toString()}`).to.equal(true);
    expect(await opal.value("admin", id, 'identical(d, list(a = 1, b = "x")) && identical(y, c(1, 2, 3))')).to.equal(true);

    const content = Buffer.alloc(300 * 1024);
    for (let i = 0; i < content.length; i++) content[i] = (i * 7 + (i >> 8)) & 0xff;
    const uploaded = await opal.upload("admin", id, "data.bin", content, "application/octet-stream");
    expect(is2xx(uploaded), `${uploaded.status} ${uploaded.body.toString()}`).to.equal(true);
    expect(await opal.value("admin", id, "file.size('data.bin')")).to.equal(content.length);
    const downloaded = await opal.download("admin", id, "data.bin");
    expect(downloaded.status).to.equal(200);
    expect(downloaded.body.equals(content), "the same bytes").to.equal(true);

    const closed = await opal.close("admin", id);
    expect(is2xx(closed), String(closed.status)).to.equal(true);
    expect((await opal.eval("admin", id, "1", false)).status).to.equal(404);
  });

  it('evaluates and assigns scripts sent in ISO-8859-1 without a charset: "été" (22 e9 74 e9 22) answers "été"', async () => {
    const id = await opal.session("admin");
    const body = latin1('"été"');
    expect([...body]).to.deep.equal([0x22, 0xe9, 0x74, 0xe9, 0x22]);
    const answer = await opal.eval("admin", id, body, false);
    expect(answer.status, answer.body.toString()).to.equal(200);
    expect(JSON.parse(answer.springString())).to.equal("été");
    const assigned = await opal.assign("admin", id, "s", "application/x-rscript", 'paste("ça", "été")');
    expect(is2xx(assigned), `${assigned.status} ${assigned.body.toString()}`).to.equal(true);
    expect(await opal.value("admin", id, 's == "\\u00e7a \\u00e9t\\u00e9"')).to.equal(true);
    // rockr (httr) sends the same script as UTF-8: the same answer.
    expect(JSON.parse((await opal.eval("admin", id, Buffer.from('"été"', "utf8"), false)).springString())).to.equal("été");
    expect(is2xx(await opal.close("admin", id))).to.equal(true);
  });

  it("answers JSON to an Accept that lists XML types first (RestTemplate with jackson-dataformat-xml on the classpath)", async () => {
    const opened = await opal.open("admin", SPRING_ACCEPT_WITH_XML);
    expect(opened.status).to.equal(201);
    const id = expectRockSessionInfo(opened);
    expect(is2xx(await opal.close("admin", id))).to.equal(true);
  });

  it("ensurePackage in an administrator's session installs for every later session, as Rock does (AbstractROperation)", async () => {
    const id = await opal.session("admin");
    const installed = await opal.eval("admin", id, ensurePackage("plainPkg", repository.url), false);
    expect(installed.status, installed.body.toString()).to.equal(200);
    expect(await opal.value("admin", id, "plainPkg::hello()")).to.equal("plainPkg 1.0.0");

    const later = await opal.session("admin");
    expect(await opal.value("admin", later, "require(plainPkg)")).to.equal(true);
    expect(await opal.value("admin", later, "plainPkg::hello()")).to.equal("plainPkg 1.0.0");
    const list = (await opal.packages("admin")).json<{ rowNames: string[] }>();
    expect(list.rowNames, "listed by GET /rserver/packages").to.include("plainPkg");
    expect(await readdir(world.library)).to.include("plainPkg");
    expect(is2xx(await opal.close("admin", later))).to.equal(true);
    expect(is2xx(await opal.close("admin", id))).to.equal(true);
  });

  it("ensurePackage in a plain user's session stays in that session (role user: a library of its own)", async () => {
    const id = await opal.session("user");
    const installed = await opal.eval("user", id, ensurePackage("dsTestB", repository.url), false);
    expect(installed.status, installed.body.toString()).to.equal(200);
    expect(await opal.value("user", id, "require(dsTestB)")).to.equal(true);

    const other = await opal.session("user");
    expect(await opal.value("user", other, "requireNamespace('dsTestB', quietly = TRUE)")).to.equal(false);
    const list = (await opal.packages("admin")).json<{ rowNames: string[] }>();
    expect(list.rowNames).to.not.include("dsTestB");
    expect(await readdir(world.library)).to.not.include("dsTestB");
    expect(is2xx(await opal.close("user", other))).to.equal(true);
    expect(is2xx(await opal.close("user", id))).to.equal(true);
  });

  it("ensureCRANPackage at the cluster's start installs from the service's repositories (RServerCluster.start, RockService)", async () => {
    // Opal names no repository here: Rock's sessions have options(repos) from its R profile.
    const id = await opal.session("admin");
    const ensured = await opal.eval("admin", id, "if (!require(dsTestB)) { install.packages('dsTestB') }", false);
    expect(ensured.status, ensured.body.toString()).to.equal(200);
    expect(is2xx(await opal.close("admin", id))).to.equal(true);
    const later = await opal.session("admin");
    expect(await opal.value("admin", later, "require(dsTestB)")).to.equal(true);
    expect(is2xx(await opal.close("admin", later))).to.equal(true);
  });

  it("installs an uploaded archive as InstallLocalPackageOperation does, for every later session, then removes it (RockService)", async () => {
    const archive = await buildPackage("opalLocalPkg", "1.0.0", "local");
    try {
      const id = await opal.session("admin");
      const uploaded = await opal.upload("admin", id, "opalLocalPkg_1.0.0.tar.gz", await readFile(archive.file), "application/gzip");
      expect(is2xx(uploaded), `${uploaded.status} ${uploaded.body.toString()}`).to.equal(true);
      const installed = await opal.eval("admin", id, "install.packages('opalLocalPkg_1.0.0.tar.gz', repos = NULL, type ='source')", true);
      expect(installed.status, installed.body.toString()).to.equal(200);
      expect(mediaType(installed.contentType())).to.equal("application/octet-stream");
      expect(is2xx(await opal.close("admin", id))).to.equal(true);
    } finally {
      await archive.dispose();
    }
    const later = await opal.session("admin");
    expect(await opal.value("admin", later, "opalLocalPkg::hello()")).to.equal("local");
    expect(is2xx(await opal.close("admin", later))).to.equal(true);
    const described = JSON.parse((await opal.package("admin", "opalLocalPkg")).springString()) as Record<string, string>;
    expect(described.Version).to.equal("1.0.0");

    const removed = await opal.remove("admin", "opalLocalPkg");
    expect(is2xx(removed), String(removed.status)).to.equal(true);
    expect((await opal.packages("admin")).json<{ rowNames: string[] }>().rowNames).to.not.include("opalLocalPkg");
  });

  it("reads the console log as RockService.getLog does: text/plain lines, R's output in UTF-8", async () => {
    const log = await opal.log("admin", 1000);
    expect(log.status).to.equal(200);
    expect(mediaType(log.contentType())).to.equal("text/plain");
    // Rock writes its log through a PrintWriter in the JVM's charset (UTF-8 since Java 18) and names
    // none, so Opal, which then decodes ISO-8859-1, shows R's quotes garbled with either server; a
    // charset named must be the one the bytes are in.
    const charset = /charset=([^;]+)/i.exec(log.contentType() ?? "")?.[1];
    if (charset !== undefined) expect(charset.toLowerCase()).to.equal("utf-8");
    const lines = log.body.toString("utf8").split("\n");
    expect(lines.some((line) => line.includes("installing *source* package ‘plainPkg’"))).to.equal(true);
  });

  it("updates every package as RPackageResourceHelper does (restart, PUT /rserver/packages, restart): one failing to build leaves the others updated", async () => {
    const installed = await opal.install("admin", "plainPkg");
    expect(is2xx(installed), `${installed.status} ${installed.body.toString()}`).to.equal(true);
    await world.publish("dsTestA", "1.1.0");
    // plainPkg's next version does not parse: R CMD INSTALL fails, update.packages() only warns.
    const contrib = join(world.root, "repo", "src", "contrib");
    const broken = await buildPackage("plainPkg", "2.0.0", "broken", true);
    try {
      for (const file of await readdir(contrib)) if (file.startsWith("plainPkg_")) await rm(join(contrib, file));
      await copyFile(broken.file, join(contrib, "plainPkg_2.0.0.tar.gz"));
      await indexRepository(contrib);
    } finally {
      await broken.dispose();
    }

    expect(is2xx(await opal.stop("admin"))).to.equal(true);
    expect(is2xx(await opal.start("admin"))).to.equal(true);
    const updated = await opal.updateAll("admin");
    // Rock answers 200 whatever update.packages() warned.
    expect(updated.status, updated.body.toString()).to.equal(200);
    expect(is2xx(await opal.stop("admin"))).to.equal(true);
    expect(is2xx(await opal.start("admin"))).to.equal(true);
    expect(await opal.state("admin").then((s) => s.json<{ running: boolean }>().running)).to.equal(true);

    const version = async (name: string) =>
      (JSON.parse((await opal.package("admin", name)).springString()) as Record<string, string>).Version;
    expect(await version("dsTestA")).to.equal("1.1.0");
    expect(await version("plainPkg")).to.equal("1.0.0");
    const log = (await opal.log("admin", 2000)).body.toString("utf8");
    expect(log, "the failure named in the console log").to.match(/plainPkg[’']? had non-zero exit status|plainPkg.*(fail|could not)/);
  });

  describe("packages.sessionInstalls: none", () => {
    let refusing: TestServer;
    let library: string;
    let refusingWire: Wire;

    before(async () => {
      library = await mkdtemp(join(os.tmpdir(), "rock-interop-library-"));
      refusing = await startTestServer({ r: { startOnBoot: true }, packages: { library, sessionInstalls: "none" } });
      refusingWire = new Wire(refusing.port);
    });
    after(async () => {
      refusingWire?.close();
      await refusing?.stop();
      await rm(library, { recursive: true, force: true });
    });

    it("refuses ensurePackage with an R error naming the setting, which Opal reports", async () => {
      const client = new Opal(refusingWire);
      const id = await client.session("admin");
      const refused = await client.eval("admin", id, ensurePackage("plainPkg", repository.url), false);
      expect(refused.status).to.equal(400);
      expect(refused.json<{ message: string }>().message).to.include("packages.sessionInstalls");
      expect(await readdir(library)).to.deep.equal([]);
      expect(is2xx(await client.close("admin", id))).to.equal(true);
    });
  });
});
