import { expect } from "chai";
import * as grpcJs from "@grpc/grpc-js";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { loadConfig } from "../../src/config/load.js";
import { createLogger } from "../../src/server/logger.js";
import { connectClient, rest, type RestAnswer } from "../support/clients.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startMain, type MainServer } from "../support/main-process.js";
import { basic, startTestServer, USERS, type TestServer } from "../support/server.js";
import { until } from "../r/support.js";

type Line = Record<string, unknown>;

/** The service log as written: raw text (for what must never appear) and parsed lines. */
function capture() {
  let text = "";
  return {
    destination: { write: (s: string) => void (text += s) },
    get text() {
      return text;
    },
    lines(): Line[] {
      return text
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Line);
    },
  };
}

const PASSWORD = "Pw-Zq81-never-logged";
const WRONG_PASSWORD = "Wrong-Kx47-never-logged";
const MARKER = "R-OUTPUT-MARKER-5521";
const MAX_BODY = 64 * 1024;

describe("service log", function () {
  this.timeout(60_000);
  const log = capture();
  let server: TestServer;
  const calls = (rpc: string): Line[] => log.lines().filter((l) => l.msg === "call" && l.rpc === rpc);

  before(async () => {
    server = await startTestServer({
      users: [...USERS, { name: "logged", secret: `{noop}${PASSWORD}`, roles: ["user", "catalog-administrator"] }],
      r: { startOnBoot: true, maxSessionsPerUser: 1 },
      limits: { maxBodyBytes: MAX_BODY },
      logger: createLogger({ level: "info", destination: log.destination }),
    });
  });
  after(async () => server?.stop());

  it("writes JSON lines with level, time and message, lifecycle included", () => {
    const lines = log.lines();
    expect(lines.map((l) => l.msg)).to.include.members(["listening", "R server started"]);
    for (const l of lines) expect(l).to.include.keys("level", "time", "msg");
  });

  it("has one access line per call on REST, Connect, gRPC-Web and gRPC, with status, user and duration", async () => {
    const info = await rest(server.url, "GET", "/_info", { user: "logged", password: PASSWORD });
    expect(info.status).to.equal(200);
    for (const protocol of ["connect", "grpc-web", "grpc"] as const) {
      await connectClient(RService, server.port, protocol, "manager").getServerStatus({});
    }
    const [restLine] = calls("rock.r.v1.RService/GetInfo");
    expect(restLine).to.include({ protocol: "rest", status: 200, user: "logged", request: "GET /_info", level: "info" });
    expect(restLine!.durationMs).to.be.a("number");
    const rpcLines = calls("rock.r.v1.RService/GetServerStatus");
    expect(rpcLines.map((l) => [l.protocol, l.status, l.user])).to.deep.equal([
      ["connect", "ok", "manager"],
      ["grpc-web", "ok", "manager"],
      ["grpc", "ok", "manager"],
    ]);
    // What each protocol wrote of the answer, framing included.
    for (const l of rpcLines) expect(l.bytesOut).to.be.a("number").greaterThan(5);
  });

  it("logs refusals: 401 anonymous, 403 without a role, a 429 limit as a warning", async () => {
    expect((await rest(server.url, "GET", "/r/sessions")).status).to.equal(401);
    expect((await rest(server.url, "GET", "/rserver/_log", { user: "nobody" })).status).to.equal(403);
    const first = await rest(server.url, "POST", "/r/sessions", { user: "user2" });
    const second = await rest(server.url, "POST", "/r/sessions", { user: "user2" });
    expect([first.status, second.status]).to.deep.equal([201, 429]);
    await rest(server.url, "DELETE", `/r/session/${first.json<{ id: string }>().id}`, { user: "user2" });
    expect(calls("rock.r.v1.RService/ListSessions").at(-1)).to.include({ status: 401, user: "anonymous" });
    expect(calls("rock.r.v1.RService/GetLog").at(-1)).to.include({ status: 403, user: "nobody" });
    const refused = log.lines().filter((l) => l.msg === "call refused: limit reached");
    expect(refused.at(-1)).to.include({ level: "warn", status: 429, user: "user2", rpc: "rock.r.v1.RService/CreateSession" });
  });

  it("never logs a password, an Authorization header, a share key or what R prints; the calls are there", async () => {
    const as = { user: "logged", password: PASSWORD };
    const created = await rest(server.url, "POST", "/r/sessions", as);
    const id = created.json<{ id: string }>().id;
    const evaluated = await rest(server.url, "POST", `/r/session/${id}/_eval`, {
      ...as,
      body: `cat("${MARKER}\\n"); print("${MARKER}"); 1`,
      headers: { "content-type": "application/x-rscript" },
    });
    expect(evaluated.status).to.equal(200);
    await rest(server.url, "DELETE", `/r/session/${id}`, as);

    const json = { "content-type": "application/json" };
    await rest(server.url, "POST", "/ws/draft/networks", {
      ...as,
      headers: json,
      body: JSON.stringify({ id: "logged1", name: [{ lang: "en", value: "Logged" }] }),
    });
    const key = (await rest(server.url, "PUT", "/ws/draft/network/logged1/_share_key?expire=2999-12-31", as)).text;
    expect(key).to.have.length.greaterThan(10);
    expect((await rest(server.url, "GET", `/ws/draft/network/logged1?key=${encodeURIComponent(key)}`)).status).to.equal(200);
    expect((await rest(server.url, "GET", "/r/sessions", { user: "logged", password: WRONG_PASSWORD })).status).to.equal(401);

    for (const secret of [PASSWORD, WRONG_PASSWORD, basic("logged", PASSWORD), basic("logged", WRONG_PASSWORD).slice(6), key, MARKER]) {
      expect(log.text).not.to.include(secret);
    }
    expect(calls("rock.r.v1.RService/EvalStream").at(-1)).to.include({ protocol: "rest", status: 200, user: "logged", session: id });
    expect(calls("rock.networks.v1.NetworkService/GetNetwork").at(-1)).to.include({
      status: 200,
      user: "anonymous",
      request: "GET /ws/draft/network/logged1",
    });
    expect(calls("rock.r.v1.RService/ListSessions").at(-1)).to.include({ status: 401, user: "anonymous" });
    const sessionLines = log.lines().filter((l) => l.session === id && String(l.msg).startsWith("R session"));
    expect(sessionLines.map((l) => l.msg)).to.deep.equal(["R session opened", "R session closed"]);
  });

  it("records the status the REST edge answered with: 201 for a creation and an async eval's command, 204 for no content", async () => {
    const as = { user: "logged", password: PASSWORD };
    const created = await rest(server.url, "POST", "/ws/draft/networks", {
      ...as,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: "status1", name: [{ lang: "en", value: "S" }] }),
    });
    const published = await rest(server.url, "PUT", "/ws/draft/network/status1/_publish", as);
    const session = await rest(server.url, "POST", "/r/sessions", as);
    const id = session.json<{ id: string }>().id;
    // An async eval answers its command (201): the call ended as it should, not as a client that left (499).
    const queued = await rest(server.url, "POST", `/r/session/${id}/_eval?async=true`, {
      ...as,
      headers: { "content-type": "application/x-rscript" },
      body: "1 + 1",
    });
    const ended = await rest(server.url, "DELETE", `/r/session/${id}`, as);
    expect([created, published, session, queued, ended].map((r) => r.status)).to.deep.equal([201, 204, 201, 201, 204]);
    expect(calls("rock.r.v1.RService/EvalStream").at(-1)).to.include({ status: 201, request: `POST /r/session/${id}/_eval` });
    expect(calls("rock.networks.v1.NetworkService/CreateNetwork").at(-1)).to.include({ status: 201, request: "POST /ws/draft/networks" });
    expect(calls("rock.networks.v1.NetworkService/Publish").at(-1)).to.include({ status: 204, bytesOut: 0 });
    expect(calls("rock.r.v1.RService/CreateSession").at(-1)).to.include({ status: 201, user: "logged" });
    expect(calls("rock.r.v1.RService/DeleteSession").at(-1)).to.include({ status: 204 });
  });

  it("counts the bytes each REST answer wrote: a JSON answer, a raw download, a newline-delimited JSON stream, none for a HEAD", async () => {
    const as = { user: "logged", password: PASSWORD };
    // A HEAD is answered GET's headers, Content-Length included, and no body: no byte of it counted.
    const got = await rest(server.url, "GET", "/_info", as);
    const head = await rest(server.url, "HEAD", "/_info", as);
    expect([got.status, head.status, head.bytes.length]).to.deep.equal([200, 200, 0]);
    expect(head.headers.get("content-length")).to.equal(String(got.bytes.length));
    const infoLines = calls("rock.r.v1.RService/GetInfo").slice(-2);
    expect(infoLines.map((l) => [l.request, l.status, l.bytesOut])).to.deep.equal([
      ["GET /_info", 200, got.bytes.length],
      ["HEAD /_info", 200, 0],
    ]);
    const id = (await rest(server.url, "POST", "/r/sessions", as)).json<{ id: string }>().id;
    try {
      const script = "paste(rep('é', 1000), collapse = '')";
      const evaluated = await rest(server.url, "POST", `/r/session/${id}/_eval`, {
        ...as,
        body: script,
        headers: { "content-type": "application/x-rscript" },
      });
      expect(evaluated.status).to.equal(200);
      expect(calls("rock.r.v1.RService/EvalStream").at(-1)).to.include({
        bytesIn: Buffer.byteLength(script),
        bytesOut: evaluated.bytes.length,
      });
      expect(evaluated.bytes.length).to.be.greaterThan(2000);

      const file = Buffer.alloc(300_000, 7);
      const uploaded = await rest(server.url, "POST", `/r/session/${id}/_upload?path=f.bin`, {
        ...as,
        body: file,
        headers: { "content-type": "application/octet-stream" },
      });
      expect(uploaded.status).to.be.within(200, 201);
      expect(calls("rock.r.v1.RService/UploadFile").at(-1)).to.include({ bytesIn: file.length, bytesOut: uploaded.bytes.length });
      const downloaded = await rest(server.url, "GET", `/r/session/${id}/_download?path=f.bin`, as);
      expect(downloaded.bytes.equals(file)).to.equal(true);
      expect(calls("rock.r.v1.RService/DownloadFile").at(-1)).to.include({ status: 200, bytesOut: file.length });

      const executed = await rest(server.url, "POST", `/r/session/${id}/_execute`, {
        ...as,
        body: "for (i in 1:50) print(i); 1",
        headers: { "content-type": "application/x-rscript" },
      });
      // Console output reaches the stream in whatever pieces the pipe delivered; only their concatenation is stable.
      const lines = executed.text
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { output?: string; json?: unknown });
      expect(lines.map((line) => line.output ?? "").join("")).to.include("[1] 50\n");
      expect(lines.at(-1)).to.have.property("json");
      expect(calls("rock.r.v1.RService/Execute").at(-1)).to.include({ status: 200, bytesOut: executed.bytes.length });
    } finally {
      await rest(server.url, "DELETE", `/r/session/${id}`, as);
    }
  });

  it("has a line for each request the REST edge refuses before any RPC runs, without its query or credentials", async () => {
    const as = { user: "logged", password: PASSWORD };
    const json = { "content-type": "application/json" };
    const refusals: [string, string, Parameters<typeof rest>[3], number][] = [
      ["GET", "/no/such/path?key=query-secret-1", {}, 404],
      ["DELETE", "/_info", as, 405],
      ["GET", "/r/session/%E0%A4%A/commands", as, 400],
      ["POST", "/ws/draft/networks", { ...as, body: "{}", headers: { "content-type": "text/plain" } }, 415],
      ["POST", "/ws/draft/networks", { ...as, body: "{not json", headers: json }, 400],
      ["POST", "/ws/draft/networks", { ...as, body: `"${"x".repeat(MAX_BODY)}"`, headers: json }, 413],
    ];
    const answers: RestAnswer[] = [];
    for (const [method, path, options, status] of refusals) {
      const answer = await rest(server.url, method, path, options);
      expect(answer.status, `${method} ${path}`).to.equal(status);
      answers.push(answer);
    }
    const lines = log
      .lines()
      .filter((l) => l.msg === "call" || l.msg === "call refused: limit reached")
      .slice(-refusals.length);
    expect(lines.map((l) => [l.rpc, l.request, l.status])).to.deep.equal([
      ["unrouted", "GET /no/such/path", 404],
      ["unrouted", "DELETE /_info", 405],
      ["unrouted", "GET /r/session/%E0%A4%A/commands", 400],
      ["rock.networks.v1.NetworkService/CreateNetwork", "POST /ws/draft/networks", 415],
      ["rock.networks.v1.NetworkService/CreateNetwork", "POST /ws/draft/networks", 400],
      ["rock.networks.v1.NetworkService/CreateNetwork", "POST /ws/draft/networks", 413],
    ]);
    lines.forEach((l, i) => {
      // Refused before authentication: the name given is not taken as the caller.
      expect(l).to.include({ protocol: "rest", user: "anonymous", bytesOut: answers[i]!.bytes.length });
      expect(l.durationMs).to.be.a("number");
    });
    expect(lines.at(-1)).to.include({ level: "warn", msg: "call refused: limit reached" });
    expect(log.text).not.to.include("query-secret-1");
    expect(log.text).not.to.include(PASSWORD);
  });

  it("has a line for a gRPC call of a method the server does not have", async () => {
    const client = new grpcJs.Client(`127.0.0.1:${server.port}`, grpcJs.credentials.createInsecure());
    try {
      const error = await new Promise<grpcJs.ServiceError | null>((resolve) =>
        client.makeUnaryRequest(
          "/rock.r.v1.RService/NoSuchMethod",
          (b: Buffer) => b,
          (b: Buffer) => b,
          Buffer.alloc(3),
          (e) => resolve(e),
        ),
      );
      expect(error?.code).to.equal(grpcJs.status.UNIMPLEMENTED);
    } finally {
      client.close();
    }
    const line = log
      .lines()
      .filter((l) => l.msg === "call")
      .at(-1);
    expect(line).to.include({
      rpc: "unrouted",
      protocol: "grpc",
      request: "POST /rock.r.v1.RService/NoSuchMethod",
      status: "unimplemented",
      user: "anonymous",
    });
    expect(line!.durationMs).to.be.a("number");
  });

  it("takes its level, format and flush delay from log.* / ROCK_LOG_LEVEL, ROCK_LOG_FORMAT, ROCK_LOG_FLUSH_MS", () => {
    expect(loadConfig(undefined, { ROCK_LOG_LEVEL: "warn", ROCK_LOG_FORMAT: "pretty", ROCK_LOG_FLUSH_MS: "0" }).log).to.deep.equal({
      level: "warn",
      format: "pretty",
      flushMs: 0,
    });
    expect(loadConfig(undefined, {}).log.flushMs).to.equal(100);
    expect(() => loadConfig(undefined, { ROCK_LOG_FLUSH_MS: "-5" })).to.throw(
      /log\.flushMs \(ROCK_LOG_FLUSH_MS\): expected an integer from 0 to 10000/,
    );
    expect(() => loadConfig(undefined, { ROCK_LOG_LEVEL: "loud" })).to.throw(/log\.level \(ROCK_LOG_LEVEL\): expected one of/);
    expect(() => loadConfig(undefined, { ROCK_LOG_FORMAT: "xml" })).to.throw(
      /log\.format \(ROCK_LOG_FORMAT\): expected json or pretty, not 'xml'/,
    );
  });

  describe("on stderr, as the service writes it (a process of its own, its stderr a pipe)", () => {
    let dataDir: string;
    let server: MainServer | undefined;
    beforeEach(() => {
      dataDir = mkdtempSync(join(tmpdir(), "rock-log-data-"));
    });
    afterEach(async () => {
      await server?.stop();
      server = undefined;
      rmSync(dataDir, { recursive: true, force: true });
    });
    const accessLines = (text: string) =>
      text.split("\n").filter((l) => l.includes('"msg":"call"') && l.includes("GET /r/sessions")).length;
    const list = (url: string) => fetch(`${url}/r/sessions`, { headers: { authorization: basic("boss", PASSWORD) } }).then((r) => r.status);

    const start = (flushMs: string) =>
      startMain({
        ROCK_DATA_DIR: dataDir,
        ROCK_ADMINISTRATOR_NAME: "boss",
        ROCK_ADMINISTRATOR_PASSWORD: PASSWORD,
        ROCK_LOG_FLUSH_MS: flushMs,
      });

    for (const flushMs of ["100", "0"]) {
      it(`writes each access line within log.flushMs (${flushMs})`, async () => {
        const started = (server = await start(flushMs));
        for (let i = 0; i < 20; i++) expect(await list(started.url)).to.equal(200);
        await until(() => accessLines(started.stderr()) === 20, 2_000);
        expect(started.stderr()).to.not.include(PASSWORD);
      });
    }

    it("gathers info lines for log.flushMs, and writes what waits when it stops", async () => {
      const started = (server = await start("10000"));
      for (let i = 0; i < 20; i++) expect(await list(started.url)).to.equal(200);
      await new Promise((resolve) => setTimeout(resolve, 300));
      // 20 lines are less than the 8 KiB that are written without waiting.
      expect(accessLines(started.stderr())).to.equal(0);
      await started.stop();
      expect(accessLines(started.stderr())).to.equal(20);
    });
  });
});
