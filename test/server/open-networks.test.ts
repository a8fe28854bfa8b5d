import { expect } from "chai";
import { networkMatcher } from "../../src/auth/open-networks.js";
import { parseNetwork } from "../../src/config/networks.js";
import { loadConfig } from "../../src/config/load.js";
import { startTestServer, type TestServer } from "../support/server.js";

describe("ROCK_SECURITY_ENABLED=false: open to the networks named, never to anyone else", function () {
  this.timeout(30_000);

  it("matches client addresses against IPv4 and IPv6 networks, IPv4 seen as IPv6 included", () => {
    const open = networkMatcher(["10.0.0.0/8", "127.0.0.1", "fd00::/8"], "auth.openNetworks");
    expect(open("10.1.2.3")).to.equal(true);
    expect(open("::ffff:10.1.2.3")).to.equal(true);
    expect(open("127.0.0.1")).to.equal(true);
    expect(open("127.0.0.2")).to.equal(false);
    expect(open("11.0.0.1")).to.equal(false);
    expect(open("fd12::1")).to.equal(true);
    expect(open("::1")).to.equal(false);
    expect(open(undefined)).to.equal(false);
    expect(networkMatcher([], "auth.openNetworks")("127.0.0.1")).to.equal(false);
    for (const bad of ["10.0.0.0/33", "not-an-address", "10.0.0.0/8/1", "fd00::/129", "10.0.0.0/x"]) {
      expect(() => parseNetwork(bad, "auth.openNetworks"), bad).to.throw(/auth.openNetworks: expected networks such as 10.0.0.0\/8/);
    }
    expect(() => loadConfig(undefined, { ROCK_SECURITY_OPEN_NETWORKS: "10.0.0.0/8, bogus" })).to.throw(/not 'bogus'/);
  });

  describe("from a client inside an open network", () => {
    let server: TestServer;
    before(
      async () =>
        (server = await startTestServer({
          auth: { securityEnabled: false, openNetworks: ["127.0.0.0/8"] },
          r: { startOnBoot: true, spareSessions: 0 },
        })),
    );
    after(() => server.stop());

    it("serves the R service without credentials, and with credentials that match no user (as Opal's pods send)", async () => {
      const anonymous = await fetch(`${server.url}/r/sessions`, { method: "POST" });
      expect(anonymous.status, await anonymous.clone().text()).to.equal(201);
      const stranger = await fetch(`${server.url}/rserver`, {
        headers: { authorization: `Basic ${Buffer.from("opal:whatever").toString("base64")}` },
      });
      expect(stranger.status).to.equal(200);
    });

    it("keeps the catalogue closed: the open caller has no catalogue role", async () => {
      const res = await fetch(`${server.url}/ws/draft/networks`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ name: [{ lang: "en", value: "N" }] }),
      });
      expect(res.status).to.equal(403);
    });
  });

  describe("from a client outside the open networks", () => {
    let server: TestServer;
    before(async () => (server = await startTestServer({ auth: { securityEnabled: false, openNetworks: ["10.0.0.0/8"] } })));
    after(() => server.stop());

    it("still asks for credentials (401) and checks them", async () => {
      expect((await fetch(`${server.url}/rserver`)).status).to.equal(401);
      const wrong = await fetch(`${server.url}/rserver`, {
        headers: { authorization: `Basic ${Buffer.from("admin:nope").toString("base64")}` },
      });
      expect(wrong.status).to.equal(401);
      const right = await fetch(`${server.url}/rserver`, {
        headers: { authorization: `Basic ${Buffer.from("admin:admin").toString("base64")}` },
      });
      expect(right.status).to.equal(200);
    });
  });

  describe("without open networks", () => {
    let server: TestServer;
    const warnings: string[] = [];
    before(async () => {
      const logger = { info: () => {}, error: () => {}, warn: (msg: string) => void warnings.push(msg) };
      server = await startTestServer({ auth: { securityEnabled: false }, logger });
    });
    after(() => server.stop());

    it("changes nothing but a warning at start: every call needs credentials", async () => {
      expect((await fetch(`${server.url}/rserver`)).status).to.equal(401);
      expect(warnings.some((w) => w.startsWith("ROCK_SECURITY_ENABLED=false alone changes nothing"))).to.equal(true);
    });
  });
});
