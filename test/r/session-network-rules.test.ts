/**
 * The pure parts of r.sessionNetwork restricted: the address plan, the destinations of its settings,
 * the resolv.conf sessions see, and the tables, which `nft --check` (no change made) parses as the
 * kernel would be given them.
 */
import { expect } from "chai";
import { execFileSync } from "node:child_process";
import { parseDestination } from "../../src/config/networks.js";
import { networkPlan } from "../../src/r/confine/network/plan.js";
import { parseResolvConf, sessionResolvConf } from "../../src/r/confine/network/resolv-conf.js";
import { hostTable, routerTable } from "../../src/r/confine/network/rules.js";
import { onPath } from "../../src/r/confine/on-path.js";

describe("r.sessionNetwork restricted: plan, settings, resolv.conf and tables", () => {
  const range = { first: 70_000, last: 70_999 };

  it("names everything by the range, and gives each uid a link of its own outside the uplinks' block", () => {
    const plan = networkPlan(range, () => false);
    expect(plan.table).to.equal("rock-ts-70000-70999");
    expect(plan.uplink).to.equal("rk70000-70999");
    expect([plan.hostAddress, plan.routerAddress]).to.deep.equal(["169.254.69.193", "169.254.69.194"]);
    expect(plan.linkOf(70_000)).to.equal("169.254.128.0");
    expect(plan.linkOf(70_999)).to.equal("169.254.135.206");
    expect(networkPlan({ first: 1_000_000, last: 1_000_999 }, () => false).uplink, "a device name has 15 characters at most").to.equal(
      "rk1000000",
    );
  });

  it("takes the next /30 when an address of the host holds the one the range points at", () => {
    const plan = networkPlan(range, (address) => address === "169.254.69.194");
    expect(plan.hostAddress).to.equal("169.254.69.197");
  });

  it("reads destinations with an optional port, and refuses what is not an IPv4 network", () => {
    expect(parseDestination("10.0.0.0/8", "k")).to.deep.equal({ address: "10.0.0.0", prefix: 8 });
    expect(parseDestination("192.168.1.5:5432", "k")).to.deep.equal({ address: "192.168.1.5", prefix: 32, port: 5432 });
    expect(parseDestination("10.1.0.0/16:443", "k")).to.deep.equal({ address: "10.1.0.0", prefix: 16, port: 443 });
    for (const bad of ["fd00::/8", "10.0.0.0/33", "10.0.0.1:0", "10.0.0.1:70000", "db.example.org"])
      expect(() => parseDestination(bad, "r.sessionNetworkDeny"), bad).to.throw(/^r\.sessionNetworkDeny: expected IPv4 networks/);
  });

  it("gives sessions the relay as their one name server, with the host's search domains and options", () => {
    const host = parseResolvConf(
      "# made by hand\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\nnameserver bogus\nsearch example.org\noptions ndots:5 edns0\n",
    );
    expect(host.nameservers).to.deep.equal(["127.0.0.53", "fe80::1%eth0"]);
    expect(sessionResolvConf(host, "169.254.81.113")).to.equal("nameserver 169.254.81.113\nsearch example.org\noptions ndots:5 edns0\n");
  });

  it("writes tables nft accepts, allowed destinations before the refusals", function () {
    if (!onPath("nft") || process.getuid?.() !== 0) {
      console.log("      skipped: nft --check needs nft and root (npm test installs nft as root)");
      this.skip();
    }
    const plan = networkPlan(range, () => false);
    const text = hostTable({
      plan,
      dns: { udp: 40_001, tcp: 40_002 },
      allow: [{ address: "192.168.1.5", prefix: 32, port: 5432 }],
      deny: [{ address: "10.9.0.0", prefix: 16 }],
    });
    for (const table of [text, routerTable()]) execFileSync("nft", ["--check", "-f", "-"], { input: table });
    const onward = text.slice(text.indexOf("chain onward"));
    expect(onward.indexOf("192.168.1.5/32 meta l4proto { tcp, udp } th dport 5432 accept")).to.be.greaterThan(0);
    expect(onward.indexOf("accept")).to.be.below(onward.indexOf("169.254.0.0/16 jump refuse"));
    expect(onward).to.include("ip daddr 10.9.0.0/16 jump refuse");
    expect(() =>
      execFileSync("nft", ["--check", "-f", "-"], { input: text.replace("jump refuse", "jump nowhere"), stdio: "pipe" }),
    ).to.throw();
  });
});
