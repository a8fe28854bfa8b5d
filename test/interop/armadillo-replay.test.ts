/**
 * MOLGENIS Armadillo's calls to Rock, replayed from its sources (GitHub
 * molgenis/molgenis-service-armadillo, r/src/main/java/org/molgenis/r/: rock/RockConnection,
 * RServerConnectionFactory, service/RExecutorServiceImpl, service/ProcessServiceImpl; and
 * armadillo/…/ArmadilloSession): each request with the method, path, headers and body encoding its Java
 * code sends, each answer read as strictly as Armadillo reads it. Armadillo 3 to 5 run R only through
 * Rock containers (profiles), all with one Rock account ("administrator"). Its RestClient runs on Apache
 * HttpClient 5 (no Accept unless set, bodies of unknown length chunked, gzip accepted); its health check
 * is a bare HttpURLConnection HEAD. Which file each step comes from: docs/compatibility.md.
 */
import { expect } from "chai";
import { mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import os from "node:os";
import { join } from "node:path";
import { startTestServer, type TestServer } from "../support/server.js";
import {
  APACHE_CLIENT,
  JAVA_DEFAULT_ACCEPT,
  JAVA_DEFAULT_ACCEPT_BEFORE_19,
  JAVA_USER_AGENT,
  basicAuthorization,
  buildPackage,
  chunked,
  expectRockSessionInfo,
  latin1,
  mediaType,
  rockErrorMessage,
  springMultipart,
  type Exchange,
  Wire,
} from "./java-clients.js";

const is2xx = (answer: Exchange): boolean => answer.status >= 200 && answer.status < 300;

/** RockConnection over RestClient: its default headers are the Authorization alone (set twice, the second wins). */
class Armadillo {
  constructor(
    private readonly wire: Wire,
    private readonly user: string,
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...APACHE_CLIENT, ...extra, Authorization: basicAuthorization(this.user) };
  }

  /** RServerConnectionFactory.doHead: `new URL("http://host:port")`, HEAD, no credentials. */
  head(accept: string): Promise<Exchange> {
    return this.wire.send("HEAD", "/", { "User-Agent": JAVA_USER_AGENT, Accept: accept });
  }
  /** openSession: an empty LinkedMultiValueMap as application/json, which Jackson writes as `{}` of unknown length. */
  open(): Promise<Exchange> {
    return this.wire.send("POST", "/r/sessions", this.headers({ "Content-Type": "application/json" }), { chunks: [Buffer.from("{}")] });
  }
  /** eval(expr, serialized): the String through StringHttpMessageConverter (ISO-8859-1, its length known). */
  eval(id: string, script: string | Buffer, serialized = false): Promise<Exchange> {
    const body = Buffer.isBuffer(script) ? script : latin1(script);
    const accept = serialized ? "application/octet-stream, application/json" : "application/json";
    return this.wire.send(
      "POST",
      `/r/session/${id}/_eval`,
      this.headers({ "Content-Type": "application/x-rscript", "Content-Length": String(body.length), Accept: accept }),
      body,
    );
  }
  /** writeFile: a multipart InputStreamResource of unknown length, chunked; toBodilessEntity. */
  upload(id: string, fileName: string, content: Buffer): Promise<Exchange> {
    const { contentType, body } = springMultipart(fileName, content, "application/gzip");
    return this.wire.send(
      "POST",
      `/r/session/${id}/_upload?path=${fileName}&overwrite=true`,
      this.headers({ "Content-Type": contentType }),
      chunked(body, 8192),
    );
  }
  download(id: string, fileName: string): Promise<Exchange> {
    return this.wire.send("GET", `/r/session/${id}/_download?path=${fileName}`, this.headers());
  }
  close(id: string): Promise<Exchange> {
    return this.wire.send("DELETE", `/r/session/${id}`, this.headers());
  }

  async session(): Promise<string> {
    const opened = await this.open();
    expect(opened.status, opened.body.toString()).to.equal(201);
    return expectRockSessionInfo(opened);
  }
  /** RExecutorServiceImpl.execute(cmd, connection): JSON, read into RockResult; an error status throws. */
  async execute(id: string, script: string): Promise<unknown> {
    const answer = await this.eval(id, script);
    expect(answer.status, answer.body.toString()).to.equal(200);
    expect(mediaType(answer.contentType())).to.equal("application/json");
    return JSON.parse(answer.body.toString("utf8"));
  }
  /** ProcessServiceImpl.getPid: `asInteger()` of the JSON (a bare number or a one-element array). */
  async pid(id: string): Promise<number> {
    const value = await this.execute(id, "ps::ps_pid(ps::ps_handle())");
    const pid = Array.isArray(value) ? value[0] : value;
    expect(Number.isInteger(pid), `pid ${JSON.stringify(value)}`).to.equal(true);
    return pid as number;
  }
}

/** RockResult#asLogical of a JSON answer: `true`, or `[true]`. */
const asLogical = (value: unknown): boolean => (Array.isArray(value) ? value[0] : value) === true;

describe("Armadillo's calls to Rock (molgenis/molgenis-service-armadillo), replayed", function () {
  this.timeout(120_000);
  let scratch: string;
  let library: string;
  let server: TestServer;
  let wire: Wire;
  let armadillo: Armadillo;

  before(async function () {
    this.timeout(120_000);
    // A library of the test's own: an administrator's installs from a session land in packages.library,
    // which sessions (uids of their own) read, so it is 0755 as R's site libraries are, not mkdtemp's 0700.
    scratch = await mkdtemp(join(os.tmpdir(), "rock-interop-library-"));
    library = join(scratch, "library");
    await mkdir(library, { mode: 0o755 });
    server = await startTestServer({ r: { startOnBoot: true }, packages: { library } });
    wire = new Wire(server.port);
    // ArmadilloConnectionFactory / RockConnectionFactory: every profile's connections as "administrator".
    armadillo = new Armadillo(wire, "admin");
  });
  after(async () => {
    wire?.close();
    await server?.stop();
    await rm(scratch, { recursive: true, force: true });
  });

  it("passes the health check: HEAD / without credentials answers 200, with a JDK's default Accept old or new (RServerConnectionFactory.doHead)", async () => {
    for (const accept of [JAVA_DEFAULT_ACCEPT, JAVA_DEFAULT_ACCEPT_BEFORE_19]) {
      const head = await armadillo.head(accept);
      expect(head.status, `HEAD / with Accept: ${accept}`).to.equal(200);
      expect(head.body.length).to.equal(0);
    }
    // GET / is Rock's home: the same document as /_info.
    const home = await wire.send("GET", "/", { "User-Agent": JAVA_USER_AGENT, Accept: JAVA_DEFAULT_ACCEPT_BEFORE_19 });
    const info = await wire.send("GET", "/_info", { "User-Agent": JAVA_USER_AGENT, Accept: JAVA_DEFAULT_ACCEPT });
    expect(home.status).to.equal(200);
    expect(mediaType(home.contentType())).to.equal("application/json");
    expect(home.json()).to.deep.equal(info.json());
  });

  it("opens, evaluates (JSON and R serialization), uploads, downloads and closes a session as RockConnection does", async () => {
    const id = await armadillo.session();
    // ArmadilloConnectionFactoryImpl: the profile's whitelist loaded, then DataSHIELD options set.
    expect(await armadillo.execute(id, 'base::lapply(c("stats"), library, character.only = TRUE)')).to.be.an("array");
    expect(await armadillo.execute(id, "base::options(datashield.privacyLevel = 5)")).to.satisfy((v: unknown) => v !== undefined);
    await armadillo.pid(id);

    const raw = await armadillo.eval(id, "1:3", true);
    expect(raw.status).to.equal(200);
    expect(mediaType(raw.contentType())).to.equal("application/octet-stream");
    // R's XDR serialization (version 2 or 3) of an integer vector: what Armadillo hands DSI clients.
    expect(raw.body.subarray(0, 2).toString("latin1")).to.equal("X\n");

    const content = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 31) & 0xff));
    const uploaded = await armadillo.upload(id, "table.parquet", content);
    expect(is2xx(uploaded), `${uploaded.status} ${uploaded.body.toString()}`).to.equal(true);
    const downloaded = await armadillo.download(id, "table.parquet");
    expect(downloaded.status).to.equal(200);
    expect(downloaded.body.equals(content), "the same bytes").to.equal(true);

    // RockServerException: status under 500 is the client's error, the message from the JSON body.
    const failed = await armadillo.eval(id, "stop('boom')");
    expect(failed.status).to.be.within(400, 499);
    expect(rockErrorMessage(failed)).to.include("boom");

    const closed = await armadillo.close(id);
    expect(is2xx(closed), String(closed.status)).to.equal(true);
  });

  it('evaluates a script sent in ISO-8859-1 without a charset: "été" (22 e9 74 e9 22) answers "été"', async () => {
    const id = await armadillo.session();
    const body = latin1('"été"');
    expect([...body]).to.deep.equal([0x22, 0xe9, 0x74, 0xe9, 0x22]);
    const answer = await armadillo.eval(id, body);
    expect(answer.status, answer.body.toString()).to.equal(200);
    expect(answer.json()).to.equal("été");
    expect(is2xx(await armadillo.close(id))).to.equal(true);
  });

  it("installs an uploaded archive as RExecutorServiceImpl.installPackage does (remotes::install_local, require), loaded by every later session", async () => {
    const archive = await buildPackage("armadilloPkg", "1.0.0", "from armadillo");
    try {
      const id = await armadillo.session();
      const uploaded = await armadillo.upload(id, "armadilloPkg_1.0.0.tar.gz", await readFile(archive.file));
      expect(is2xx(uploaded), `${uploaded.status} ${uploaded.body.toString()}`).to.equal(true);
      await armadillo.execute(id, "remotes::install_local('armadilloPkg_1.0.0.tar.gz', dependencies = TRUE, upgrade = 'never')");
      expect(asLogical(await armadillo.execute(id, "require('armadilloPkg')")), "require() after the install").to.equal(true);
      expect(asLogical(await armadillo.execute(id, "file.remove('armadilloPkg_1.0.0.tar.gz')"))).to.equal(true);
      expect(is2xx(await armadillo.close(id))).to.equal(true);
    } finally {
      await archive.dispose();
    }
    const later = await armadillo.session();
    expect(asLogical(await armadillo.execute(later, "require('armadilloPkg')"))).to.equal(true);
    expect(await armadillo.execute(later, "armadilloPkg::hello()")).to.equal("from armadillo");
    expect(is2xx(await armadillo.close(later))).to.equal(true);
    expect(await readdir(library)).to.include("armadilloPkg");
  });

  it("ends a busy session of its own account with ps::ps_terminate(ps::ps_handle(<pid>L)), then closes it (ArmadilloSession.sessionCleanup)", async () => {
    const busy = await armadillo.session();
    const pid = await armadillo.pid(busy);
    const started = Date.now();
    const running = armadillo.eval(busy, "Sys.sleep(60); 'finished'");
    let closed: Exchange | undefined;
    try {
      // Not Armadillo's call: the test waits until the evaluation has started.
      for (let i = 0; i < 100; i++) {
        const state = await wire.send("GET", `/r/session/${busy}`, { ...APACHE_CLIENT, Authorization: basicAuthorization("admin") });
        if (state.json<{ busy: boolean }>().busy) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }

      // killProcess: a new connection of the same account, ProcessServiceImpl.terminateProcess.
      const killer = await armadillo.session();
      const terminated = await armadillo.eval(killer, `ps::ps_terminate(ps::ps_handle(${pid}L))`);
      expect(is2xx(await armadillo.close(killer))).to.equal(true);
      expect(terminated.status, terminated.body.toString()).to.equal(200);

      const ended = await running;
      expect(Date.now() - started, "ended long before the sleep").to.be.below(30_000);
      expect(ended.status, "the busy evaluation does not finish").to.not.equal(200);
      // connection.close(): Armadillo logs a warning unless the DELETE answers 2xx.
      closed = await armadillo.close(busy);
      expect(is2xx(closed), `DELETE answered ${closed.status} ${closed.body.toString()}`).to.equal(true);
    } finally {
      // A failed step leaves no session sleeping into the next tests.
      if (closed === undefined) await armadillo.close(busy);
      await running;
    }
  });

  it("never ends another account's session through ps::ps_terminate", async () => {
    const victim = new Armadillo(wire, "user");
    const other = new Armadillo(wire, "user2");
    const id = await victim.session();
    const attacker = await other.session();
    try {
      const pid = await victim.pid(id);
      const refused = await other.eval(attacker, `ps::ps_terminate(ps::ps_handle(${pid}L))`);
      expect(refused.status, refused.body.toString()).to.equal(400);
      expect(await victim.execute(id, "1 + 1")).to.equal(2);
    } finally {
      await other.close(attacker);
      await victim.close(id);
    }
  });

  it("opens more than ten sessions at once with its one account (r.maxSessionsPerUser: no limit by default, as Rock)", async () => {
    const ids: string[] = [];
    try {
      for (let i = 0; i < 12; i++) {
        const opened = await armadillo.open();
        expect(opened.status, `session ${i + 1}: ${opened.body.toString()}`).to.equal(201);
        ids.push(expectRockSessionInfo(opened));
      }
    } finally {
      for (const id of ids) await armadillo.close(id);
    }
  });
});
