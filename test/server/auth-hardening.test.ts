import http from "node:http";
import { expect } from "chai";
import * as grpc from "@grpc/grpc-js";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { NetworkService } from "../../gen/es/rock/networks/v1/networks_pb.js";
import { defaults } from "../../src/config/load.js";
import { clientKey } from "../../src/auth/throttle.js";
import { basic, startTestServer, type ConfigPatch, type TestServer } from "../support/server.js";
import { grpcClients, serveWithClients } from "../support/clients.js";

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly message: string;
}

/**
 * A REST call from a chosen loopback address (Linux routes all of 127/8 to lo), so that one test
 * server sees several clients.
 */
function restFrom(
  server: TestServer,
  from: string,
  method: string,
  path: string,
  authorization?: string,
  agent: http.Agent | false = false,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers = authorization === undefined ? {} : { authorization };
    const req = http.request({ host: "127.0.0.1", port: server.port, localAddress: from, method, path, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.once("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        const message = res.statusCode === 200 ? "" : (JSON.parse(text) as { message: string }).message;
        resolve({ status: res.statusCode ?? 0, headers: res.headers, message });
      });
    });
    req.once("error", reject);
    req.end();
  });
}

const PROTECTED = "/ws/draft/networks";
const DEFAULT_MAX_FAILURES = defaults().auth.maxFailures;

async function withServer(patch: ConfigPatch, body: (server: TestServer) => Promise<void>): Promise<void> {
  const server = await startTestServer(patch);
  try {
    await body(server);
  } finally {
    await server.stop();
  }
}

function grpcCode(md: grpc.Metadata, clients: ReturnType<typeof grpcClients>): Promise<{ code: number; details: string }> {
  return new Promise((resolve) =>
    clients.networks.listNetworks({ exclude: [] }, md, (err) =>
      resolve(err ? { code: err.code, details: err.details } : { code: 0, details: "" }),
    ),
  );
}

function metadata(authorization: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("authorization", authorization);
  return md;
}

describe("authentication hardening", function () {
  this.timeout(60_000);

  it("checks passwords off the event loop: cheap calls keep being answered while bad logins are checked", async () => {
    await withServer({}, async (server) => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        // Distinct unknown users: each costs a full bcrypt check (identical credentials would share one).
        const bad = Array.from({ length: 12 }, (_, i) => restFrom(server, "127.0.0.1", "GET", PROTECTED, basic(`ghost${i}`, "wrong")));
        let anyBadAnswered = false;
        void Promise.race(bad).then(() => (anyBadAnswered = true));
        // On the event loop, each check holds every other call until it ends: then at most a call or
        // two gets through before the first bad login is answered.
        let pings = 0;
        while (!anyBadAnswered) {
          expect((await restFrom(server, "127.0.0.1", "GET", "/_info", undefined, agent)).status).to.equal(200);
          pings++;
        }
        expect((await Promise.all(bad)).map((a) => a.status)).to.deep.equal(new Array(12).fill(401));
        expect(pings, "/_info calls answered one after the other before any bad login was").to.be.at.least(5);
      } finally {
        agent.destroy();
      }
    });
  });

  describe("failed logins per client address (default limit)", () => {
    let server: TestServer;
    before(async () => (server = await startTestServer({ auth: { maxFailures: DEFAULT_MAX_FAILURES } })));
    after(() => server.stop());

    it(`answers 429 with Retry-After over REST after ${DEFAULT_MAX_FAILURES} failures, refusing even correct credentials from that address`, async () => {
      const from = "127.0.0.11";
      for (let i = 0; i < DEFAULT_MAX_FAILURES; i++) {
        const a = await restFrom(server, from, "GET", PROTECTED, basic("admin", "wrong"));
        expect(a.status, a.message).to.equal(401);
      }
      const refused = await restFrom(server, from, "GET", PROTECTED, basic("admin", "wrong"));
      expect(refused.status).to.equal(429);
      expect(refused.message).to.match(/too many failed authentication attempts.*retry in \d+ s/i);
      const retryAfter = Number(refused.headers["retry-after"]);
      expect(retryAfter).to.be.within(1, defaults().auth.failureWindowSeconds);
      // A blocked client must not be able to test guesses against the cache of verified credentials.
      expect((await restFrom(server, from, "GET", PROTECTED, basic("admin"))).status).to.equal(429);
      expect((await restFrom(server, from, "GET", "/_info")).status, "anonymous public calls").to.equal(200);
    });

    it("does not throttle logins from other addresses", async () => {
      const from = "127.0.0.12";
      for (let i = 0; i <= DEFAULT_MAX_FAILURES; i++) await restFrom(server, from, "GET", PROTECTED, basic(`nobody${i}`, "wrong"));
      expect((await restFrom(server, from, "GET", PROTECTED, basic("editor"))).status).to.equal(429);
      expect((await restFrom(server, "127.0.0.13", "GET", PROTECTED, basic("editor"))).status).to.equal(200);
      expect((await restFrom(server, "127.0.0.14", "GET", PROTECTED, basic("reviewer"))).status).to.equal(200);
    });

    it(`answers RESOURCE_EXHAUSTED over gRPC after ${DEFAULT_MAX_FAILURES} failures`, async () => {
      const clients = grpcClients(server.port);
      try {
        for (let i = 0; i < DEFAULT_MAX_FAILURES; i++) {
          expect((await grpcCode(metadata(basic("admin", "wrong")), clients)).code).to.equal(grpc.status.UNAUTHENTICATED);
        }
        const refused = await grpcCode(metadata(basic("admin", "wrong")), clients);
        expect(refused.code).to.equal(grpc.status.RESOURCE_EXHAUSTED);
        expect(refused.details).to.match(/too many failed authentication attempts.*retry in \d+ s/i);
      } finally {
        clients.close();
      }
    });
  });

  it("lets a correct login through again once the window has passed", async () => {
    await withServer({ auth: { maxFailures: 1, failureWindowSeconds: 1 } }, async (server) => {
      const from = "127.0.0.21";
      expect((await restFrom(server, from, "GET", PROTECTED, basic("admin", "wrong"))).status).to.equal(401);
      const refused = await restFrom(server, from, "GET", PROTECTED, basic("admin"));
      expect(refused.status).to.equal(429);
      await new Promise((r) => setTimeout(r, Number(refused.headers["retry-after"]) * 1000 + 50));
      expect((await restFrom(server, from, "GET", PROTECTED, basic("admin"))).status).to.equal(200);
    });
  });

  it("refuses logins with 429 rather than queueing without bound when too many checks are waiting", async () => {
    await withServer({ auth: { hashWorkers: 1, hashQueue: 1 } }, async (server) => {
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) => restFrom(server, "127.0.0.1", "GET", PROTECTED, basic(`ghost${i}`, "wrong"))),
      );
      const refused = answers.filter((a) => a.status === 429);
      expect(answers.filter((a) => a.status === 401).length, "one checked, one queued").to.be.at.least(2);
      expect(refused.length).to.be.at.least(1);
      expect(refused[0]!.message).to.match(/too many authentication attempts in progress/i);
      expect(refused[0]!.headers["retry-after"]).to.equal("1");
    });
  });

  it("remembers a bounded number of clients, forgetting the oldest", async () => {
    await withServer({ auth: { maxFailures: 1, trackedClients: 2 } }, async (server) => {
      const [a, b, c] = ["127.0.0.31", "127.0.0.32", "127.0.0.33"];
      const wrong = basic("admin", "wrong");
      expect((await restFrom(server, a, "GET", PROTECTED, wrong)).status).to.equal(401);
      expect((await restFrom(server, a, "GET", PROTECTED, wrong)).status).to.equal(429);
      expect((await restFrom(server, b, "GET", PROTECTED, wrong)).status).to.equal(401);
      expect((await restFrom(server, c, "GET", PROTECTED, wrong)).status).to.equal(401);
      expect((await restFrom(server, a, "GET", PROTECTED, wrong)).status, "a was forgotten when c came").to.equal(401);
      expect((await restFrom(server, c, "GET", PROTECTED, wrong)).status).to.equal(429);
    });
  });

  it("counts IPv4-mapped addresses as IPv4 and IPv6 addresses by their /64", () => {
    expect(clientKey("::ffff:192.0.2.7")).to.equal("192.0.2.7");
    expect(clientKey("192.0.2.7")).to.equal("192.0.2.7");
    expect(clientKey("2001:db8:1:2::1")).to.equal(clientKey("2001:0db8:0001:0002:ffff:ffff:ffff:ffff"));
    expect(clientKey("2001:db8:1:2::1")).not.to.equal(clientKey("2001:db8:1:3::1"));
    expect(clientKey(undefined)).to.equal("unknown");
  });

  describe("malformed Basic credentials", () => {
    const b64 = (text: string | Buffer) => Buffer.from(text).toString("base64");
    /** Each would be half-accepted by a lenient decoder (several decode to valid credentials). */
    const MALFORMED: Readonly<Record<string, string>> = {
      "no token": "Basic",
      "a character outside base64": "Basic ZWRpdG9yOmVkaXRvcg*=",
      "missing padding": "Basic ZWRpdG9yOmVkaXRvcg",
      "whitespace inside": "Basic ZWRpdG9y OmVkaXRvcg==",
      "non-zero bits after the last byte": "Basic ZWRpdG9yOmVkaXRvch==",
      "data after the padding": "Basic ZWRpdG9yOmVkaXRvcg==ZWRpdG9y",
      "the base64url alphabet": "Basic ZWRpdG9yOn5-fn4=",
      "not UTF-8": `Basic ${b64(Buffer.from([0x65, 0x3a, 0xff, 0xfe]))}`,
      "no colon": `Basic ${b64("editor")}`,
      "an empty user name": `Basic ${b64(":editor")}`,
      "a control character": `Basic ${b64("edi\u0001tor:editor")}`,
    };
    const served = serveWithClients();

    for (const [what, header] of Object.entries(MALFORMED)) {
      it(`refuses ${what} with 401 on REST, Connect, gRPC-Web and gRPC`, async () => {
        const r = await restFrom(served.server, "127.0.0.1", "GET", PROTECTED, header);
        expect(r.status).to.equal(401);
        expect(r.message).to.match(/^Malformed Basic credentials/);
        expect(r.headers["www-authenticate"]).to.match(/^Basic realm=/);
        const pub = await restFrom(served.server, "127.0.0.1", "GET", "/_info", header);
        expect(pub.status, "not taken as anonymous on a public call either").to.equal(401);
        const baseUrl = served.server.url;
        for (const transport of [
          createConnectTransport({ baseUrl, httpVersion: "1.1" }),
          createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }),
          createGrpcTransport({ baseUrl }),
        ]) {
          const err = await createClient(NetworkService, transport)
            .listNetworks({}, { headers: { authorization: header } })
            .then(
              () => undefined,
              (e: unknown) => ConnectError.from(e),
            );
          expect(err?.code).to.equal(Code.Unauthenticated);
          expect(err?.rawMessage).to.match(/^Malformed Basic credentials/);
        }
        const g = await grpcCode(metadata(header), served.clients);
        expect(g.code).to.equal(grpc.status.UNAUTHENTICATED);
        expect(g.details).to.match(/^Malformed Basic credentials/);
      });
    }

    it("still accepts well-formed credentials and treats other schemes as no credentials", async () => {
      expect((await restFrom(served.server, "127.0.0.1", "GET", PROTECTED, basic("editor"))).status).to.equal(200);
      const bearer = await restFrom(served.server, "127.0.0.1", "GET", PROTECTED, "Bearer abc");
      expect(bearer.status).to.equal(401);
      expect(bearer.message).to.equal("Authentication required");
      expect((await restFrom(served.server, "127.0.0.1", "GET", "/_info", "Bearer abc")).status).to.equal(200);
    });
  });
});
