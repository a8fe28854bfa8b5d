import { expect } from "chai";
import http from "node:http";
import { startTestServer, type TestServer } from "../support/server.js";
import { rest } from "../support/clients.js";

const json = { "content-type": "application/json" };

function network(acronym: string, studyIds: string[] = []) {
  return JSON.stringify({ name: [{ lang: "en", value: `Network ${acronym}` }], acronym: [{ lang: "en", value: acronym }], studyIds });
}

describe("REST edge", () => {
  let server: TestServer;

  before(async () => {
    server = await startTestServer({ limits: { maxBodyBytes: 4096 } });
    for (const a of ["A1", "B2", "C3"]) {
      const res = await rest(server.url, "POST", "/ws/draft/networks", { user: "editor", headers: json, body: network(a, ["s1"]) });
      expect(res.status).to.equal(201);
    }
  });
  after(() => server.stop());

  it("answers 201 with an absolute Location for a creation", async () => {
    const res = await rest(server.url, "POST", "/ws/draft/networks", { user: "editor", headers: json, body: network("D4") });
    expect(res.status).to.equal(201);
    expect(res.headers.get("location")).to.equal(`${server.url}/ws/draft/network/d4`);
  });

  it("answers 204 with no body where the RPC's rest_answer option says so", async () => {
    const res = await rest(server.url, "PUT", "/ws/draft/network/d4/_status?value=UNDER_REVIEW", { user: "reviewer" });
    expect(res.status).to.equal(204);
    expect(res.text).to.equal("");
  });

  it("refuses malformed JSON with 400 and a message saying so", async () => {
    const res = await rest(server.url, "POST", "/ws/draft/networks", { user: "editor", headers: json, body: "{not json" });
    expect(res.status).to.equal(400);
    expect(res.json<{ message: string }>().message).to.match(/^Malformed JSON body/);
  });

  it("refuses a body over the configured limit with 413", async () => {
    const big = JSON.stringify({ name: [{ lang: "en", value: "x".repeat(10_000) }] });
    const res = await rest(server.url, "POST", "/ws/draft/networks", { user: "editor", headers: json, body: big });
    expect(res.status).to.equal(413);
    expect(res.json<{ message: string }>().message).to.include("4096");
  });

  it("refuses a chunked body that grows past the limit with 413", async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${server.url}/ws/draft/networks`, {
        method: "POST",
        headers: { ...json, authorization: `Basic ${Buffer.from("editor:editor").toString("base64")}` },
      });
      req.on("response", (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      for (let i = 0; i < 8; i++) req.write("x".repeat(1024));
      req.end();
    });
    expect(status).to.equal(413);
  });

  it("answers 404 for an unknown path and 405 (with Allow) for a wrong method", async () => {
    const missing = await rest(server.url, "GET", "/no/such/path", { user: "editor" });
    expect(missing.status).to.equal(404);
    const wrong = await rest(server.url, "PATCH", "/ws/draft/networks", { user: "editor" });
    expect(wrong.status).to.equal(405);
    expect(wrong.headers.get("allow")).to.equal("GET, HEAD, POST");
  });

  it("reads repeated and comma-separated list parameters", async () => {
    const res = await rest(server.url, "GET", "/ws/draft/networks?exclude=a1,b2&exclude=d4", { user: "editor" });
    expect(res.status).to.equal(200);
    expect(res.json<{ id: string }[]>().map((n) => n.id)).to.deep.equal(["c3"]);
  });

  it("refuses a number parameter that is not a number with 400 naming it", async () => {
    const res = await rest(server.url, "GET", "/ws/draft/networks?limit=many", { user: "editor" });
    expect(res.status).to.equal(400);
    expect(res.json<{ message: string }>().message).to.include("'limit'");
  });

  it("passes handler headers through (X-Total-Count) and pages", async () => {
    const res = await rest(server.url, "GET", "/ws/draft/networks?limit=1&from=1", { user: "editor" });
    expect(res.headers.get("x-total-count")).to.equal("4");
    expect(res.json<unknown[]>()).to.have.length(1);
  });

  it("decodes percent-encoded path segments", async () => {
    const res = await rest(server.url, "GET", "/ws/draft/network/%61%31", { user: "editor" });
    expect(res.status).to.equal(200);
    expect(res.json<{ id: string }>().id).to.equal("a1");
  });
});
