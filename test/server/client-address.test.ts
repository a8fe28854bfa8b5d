import { expect } from "chai";
import { networkMatcher } from "../../src/auth/open-networks.js";
import { clientAddressOf } from "../../src/server/client-address.js";
import { startTestServer, type TestServer } from "../support/server.js";

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

describe("client addresses behind a trusted proxy (server.trustedProxies)", function () {
  this.timeout(30_000);

  it("believes X-Forwarded-For only from a trusted proxy, taking the nearest hop no trusted proxy added", () => {
    const of = clientAddressOf(networkMatcher(["10.0.0.0/8"], "server.trustedProxies"));
    const req = (peer: string, xff?: string) => ({
      socket: { remoteAddress: peer },
      headers: xff === undefined ? {} : { "x-forwarded-for": xff },
    });
    expect(of(req("192.0.2.7", "198.51.100.1"))).to.equal("192.0.2.7");
    expect(of(req("10.0.0.2", "198.51.100.1"))).to.equal("198.51.100.1");
    expect(of(req("10.0.0.2", "203.0.113.9, 198.51.100.1, 10.0.0.3"))).to.equal("198.51.100.1");
    expect(of(req("10.0.0.2"))).to.equal("10.0.0.2");
    expect(of(req("10.0.0.2", "not-an-address"))).to.equal("10.0.0.2");
    expect(clientAddressOf(networkMatcher([], "server.trustedProxies"))(req("127.0.0.1", "198.51.100.1"))).to.equal("127.0.0.1");
  });

  describe("a server behind a proxy on loopback", () => {
    let server: TestServer;
    before(async () => (server = await startTestServer({ server: { trustedProxies: ["127.0.0.1/32"] }, auth: { maxFailures: 2 } })));
    after(() => server.stop());

    it("throttles the client that failed, not everyone behind the proxy", async () => {
      const get = (xff: string, password: string) =>
        fetch(`${server.url}/rserver`, { headers: { authorization: basic("admin", password), "x-forwarded-for": xff } });
      for (let i = 0; i < 2; i++) expect((await get("198.51.100.1", "wrong")).status).to.equal(401);
      expect((await get("198.51.100.1", "admin")).status, "the failing client").to.equal(429);
      expect((await get("198.51.100.2", "admin")).status, "another client behind the proxy").to.equal(200);
    });
  });
});
