import { expect } from "chai";
import http from "node:http";
import http2 from "node:http2";
import { basic, startTestServer, type TestServer } from "../support/server.js";

/** The Accept of a bare HttpURLConnection before Java 21 (Armadillo's HEAD /, Opal's RestTemplate). */
const OLD_JAVA_ACCEPT = "text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2";

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  /** Every byte the server sent after the headers. */
  readonly body: Buffer;
}

/** One HTTP/1.1 request on a socket of its own, as HttpURLConnection sends it. */
function http1(server: TestServer, method: string, path: string, headers: http.OutgoingHttpHeaders = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port: server.port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

/** One request over HTTP/2 without TLS (prior knowledge). */
function h2(server: TestServer, method: string, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(server.url);
    session.on("error", reject);
    const stream = session.request({ ":method": method, ":path": path });
    const chunks: Buffer[] = [];
    let status = 0;
    let headers: http.IncomingHttpHeaders = {};
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      headers = h;
    });
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", () => {
      session.close();
      resolve({ status, headers, body: Buffer.concat(chunks) });
    });
    stream.on("error", reject);
    stream.end();
  });
}

describe("GET / and HEAD / (Rock's home, Armadillo's probe), and HEAD on GET routes", function () {
  this.timeout(30_000);
  let server: TestServer;
  let info: Answer;

  before(async () => {
    // R runs: its start's lines are in the console log, which a followed tail answers first.
    server = await startTestServer({ r: { startOnBoot: true } });
    info = await http1(server, "GET", "/_info");
    expect(info.status).to.equal(200);
  });
  after(() => server?.stop());

  it("answers GET / without credentials as /_info, whatever the Accept", async () => {
    for (const accept of [OLD_JAVA_ACCEPT, "*/*", "text/html", undefined]) {
      const res = await http1(server, "GET", "/", accept === undefined ? {} : { accept });
      expect(res.status, `Accept: ${accept}`).to.equal(200);
      expect(res.headers["content-type"]).to.equal("application/json");
      expect(res.body.toString("utf8")).to.equal(info.body.toString("utf8"));
    }
    expect(JSON.parse(info.body.toString("utf8"))).to.include.keys("id", "name", "type", "cluster", "tags");
  });

  it("answers HEAD / without credentials with GET's status and headers, and no body, over HTTP/1.1 and HTTP/2", async () => {
    for (const accept of [OLD_JAVA_ACCEPT, "*/*"]) {
      const res = await http1(server, "HEAD", "/", { accept, "user-agent": "Java/1.8.0_402" });
      expect(res.status, `Accept: ${accept}`).to.equal(200);
      expect(res.headers["content-type"]).to.equal("application/json");
      expect(res.headers["content-length"]).to.equal(String(info.body.length));
      expect(res.body.length).to.equal(0);
    }
    const res = await h2(server, "HEAD", "/");
    expect([res.status, res.headers["content-type"], res.body.length]).to.deep.equal([200, "application/json", 0]);
  });

  it("answers / with credentials the same", async () => {
    const res = await http1(server, "GET", "/", { authorization: basic("user") });
    expect([res.status, res.body.toString("utf8")]).to.deep.equal([200, info.body.toString("utf8")]);
  });

  it("answers HEAD on other GET routes as GET, roles included, without a body", async () => {
    const admin = { authorization: basic("admin") };
    const check = await http1(server, "HEAD", "/_check");
    expect(check.status).to.equal((await http1(server, "GET", "/_check")).status);
    expect(check.body.length).to.equal(0);
    expect((await http1(server, "HEAD", "/rserver", { authorization: basic("user") })).status).to.equal(403);
    expect((await http1(server, "HEAD", "/r/sessions")).status).to.equal(401);
    const sessions = await http1(server, "HEAD", "/r/sessions", admin);
    expect([sessions.status, sessions.headers["content-type"], sessions.body.length]).to.deep.equal([200, "application/json", 0]);
  });

  it("ends a HEAD of a stream at its headers: a followed log tail answers, and stops, at its first line", async () => {
    const tail = await http1(server, "HEAD", "/rserver/_tail?follow=true", { authorization: basic("admin") });
    expect([tail.status, tail.headers["content-type"], tail.body.length]).to.deep.equal([200, "application/x-ndjson", 0]);
  });

  it("lists HEAD beside GET in a 405's Allow, and refuses HEAD where no GET is", async () => {
    const post = await http1(server, "POST", "/_info");
    expect([post.status, post.headers.allow]).to.deep.equal([405, "GET, HEAD"]);
    const head = await http1(server, "HEAD", "/r/session/x/_eval", { authorization: basic("user") });
    expect([head.status, head.headers.allow]).to.deep.equal([405, "POST"]);
  });
});
