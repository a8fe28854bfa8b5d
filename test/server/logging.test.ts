import { expect } from "chai";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { loadConfig } from "../../src/config/load.js";
import { createLogger } from "../../src/server/logger.js";
import { connectClient, rest } from "../support/clients.js";
import { basic, startTestServer, USERS, type TestServer } from "../support/server.js";

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
      return text.split("\n").filter(Boolean).map((l) => JSON.parse(l) as Line);
    },
  };
}

const PASSWORD = "Pw-Zq81-never-logged";
const WRONG_PASSWORD = "Wrong-Kx47-never-logged";
const MARKER = "R-OUTPUT-MARKER-5521";

describe("service log", function () {
  this.timeout(60_000);
  const log = capture();
  let server: TestServer;
  const calls = (rpc: string): Line[] => log.lines().filter((l) => l.msg === "call" && l.rpc === rpc);

  before(async () => {
    server = await startTestServer({
      users: [...USERS, { name: "logged", secret: `{noop}${PASSWORD}`, roles: ["user", "catalog-administrator"] }],
      r: { startOnBoot: true, maxSessionsPerUser: 1 },
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
    const evaluated = await rest(server.url, "POST", `/r/session/${id}/_eval`, { ...as, body: `cat("${MARKER}\\n"); print("${MARKER}"); 1`, headers: { "content-type": "application/x-rscript" } });
    expect(evaluated.status).to.equal(200);
    await rest(server.url, "DELETE", `/r/session/${id}`, as);

    const json = { "content-type": "application/json" };
    await rest(server.url, "POST", "/ws/draft/networks", { ...as, headers: json, body: JSON.stringify({ id: "logged1", name: [{ lang: "en", value: "Logged" }] }) });
    const key = (await rest(server.url, "PUT", "/ws/draft/network/logged1/_share_key?expire=2999-12-31", as)).text;
    expect(key).to.have.length.greaterThan(10);
    expect((await rest(server.url, "GET", `/ws/draft/network/logged1?key=${encodeURIComponent(key)}`)).status).to.equal(200);
    expect((await rest(server.url, "GET", "/r/sessions", { user: "logged", password: WRONG_PASSWORD })).status).to.equal(401);

    for (const secret of [PASSWORD, WRONG_PASSWORD, basic("logged", PASSWORD), basic("logged", WRONG_PASSWORD).slice(6), key, MARKER]) {
      expect(log.text).not.to.include(secret);
    }
    expect(calls("rock.r.v1.RService/Eval").at(-1)).to.include({ protocol: "rest", status: 200, user: "logged", session: id });
    expect(calls("rock.networks.v1.NetworkService/GetNetwork").at(-1)).to.include({ status: 200, user: "anonymous", request: "GET /ws/draft/network/logged1" });
    expect(calls("rock.r.v1.RService/ListSessions").at(-1)).to.include({ status: 401, user: "anonymous" });
    const sessionLines = log.lines().filter((l) => l.session === id && String(l.msg).startsWith("R session"));
    expect(sessionLines.map((l) => l.msg)).to.deep.equal(["R session opened", "R session closed"]);
  });

  it("takes its level and format from log.level / ROCK_LOG_LEVEL and log.format / ROCK_LOG_FORMAT", () => {
    expect(loadConfig(undefined, { ROCK_LOG_LEVEL: "warn", ROCK_LOG_FORMAT: "pretty" }).log).to.deep.equal({ level: "warn", format: "pretty" });
    expect(() => loadConfig(undefined, { ROCK_LOG_LEVEL: "loud" })).to.throw(/log\.level: expected one of/);
    expect(() => loadConfig(undefined, { ROCK_LOG_FORMAT: "xml" })).to.throw(/log\.format: expected one of/);
  });
});
