/**
 * r.sessionNetwork restricted: real server processes run in a network namespace of the test's (its
 * "host", test/support/netns/topology.ts) with listeners on that host's loopback and own address, on a
 * private and on a link-local address of a "remote" namespace, and a resolver on the host's loopback.
 * What a session reaches is asked from R in the session, as a user's code would.
 */
import { expect } from "chai";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hasCapability, NET_ADMIN, SYS_ADMIN } from "../../src/r/confine/capabilities.js";
import { onPath } from "../../src/r/confine/on-path.js";
import { rest } from "../support/clients.js";
import { runMain } from "../support/main-process.js";
import { TestTopology } from "../support/netns/topology.js";
import { spawnRock, untilAnswers, type RockProcess, type SpawnOptions } from "../support/rock-process.js";
import { testSessionUids, uidsVariable } from "../support/uids.js";
import { until } from "./support.js";

const admin = { user: "admin", password: "admin" };
const RSCRIPT = { "content-type": "application/x-rscript", accept: "application/json" };
/** The listeners' port, the same on every address. */
const PORT = 7_038;

/**
 * `reach(host, port)` in R: what the listener there answered, or "refused" (a connection refused, or
 * not made in 5 s), and how long it took.
 */
const REACH = `reach <- function(host, port) {
  t0 <- Sys.time()
  answer <- tryCatch({
    con <- socketConnection(host, port, open = "r", blocking = TRUE, timeout = 5)
    on.exit(close(con))
    readLines(con, 1L)
  }, error = function(e) "refused", warning = function(w) "refused")
  list(answer = answer, seconds = as.numeric(Sys.time() - t0, units = "secs"))
}; TRUE`;

interface Reached {
  readonly answer: string;
  readonly seconds: number;
}

describe("r.sessionNetwork restricted (as root, in network namespaces the test makes)", function () {
  this.timeout(120_000);
  let net: TestTopology;
  const started: RockProcess[] = [];

  before(async function () {
    const why =
      process.getuid?.() !== 0
        ? "not root"
        : !hasCapability(SYS_ADMIN) || !hasCapability(NET_ADMIN)
          ? "no CAP_SYS_ADMIN or CAP_NET_ADMIN"
          : !onPath("nft") || !onPath("ip")
            ? "nft or ip missing (npm test installs them as root)"
            : undefined;
    if (why) {
      console.log(`      skipped: ${why}`);
      this.skip();
    }
    net = TestTopology.make();
    await net.listen(net.host, [
      { address: "127.0.0.1", port: PORT },
      { address: net.hostAddress, port: PORT },
    ]);
    await net.listen(net.remote, [
      { address: net.privateAddress, port: PORT },
      { address: net.linkLocalAddress, port: PORT },
    ]);
    await net.resolver(net.privateAddress);
  });
  afterEach(async () => {
    for (const server of started.splice(0).reverse()) await server.kill();
  });
  after(() => net?.remove());

  /** A server in the test's host namespace, R started, serving. */
  async function serving(env: Record<string, string> = {}, options: SpawnOptions = {}): Promise<RockProcess> {
    const server = await spawnRock(
      { ROCK_R_START: "true", ROCK_R_SPARE_SESSIONS: "1", ROCK_R_SESSION_NETWORK: "restricted", ...env },
      { runner: net.runner, host: net.controlAddress, ...options },
    );
    started.push(server);
    try {
      await untilAnswers(server.url, "/_check", 200);
    } catch (e) {
      throw new Error(`${(e as Error).message}; the server said: ${server.log().slice(-3000)}`);
    }
    return server;
  }

  async function newSession(server: RockProcess): Promise<string> {
    const created = await rest(server.url, "POST", "/r/sessions", admin);
    expect(created.status, created.text).to.equal(201);
    const id = created.json<{ id: string }>().id;
    await evaluate(server, id, REACH);
    return id;
  }

  async function evaluate<T>(server: RockProcess, id: string, code: string): Promise<T> {
    const answer = await rest(server.url, "POST", `/r/session/${id}/_eval`, { ...admin, headers: RSCRIPT, body: code });
    expect(answer.status, answer.text).to.equal(200);
    return answer.json<T>();
  }

  async function reach(server: RockProcess, id: string, host: string, port = PORT): Promise<Reached> {
    return evaluate<Reached>(server, id, `reach('${host}', ${port})`);
  }

  async function refused(server: RockProcess, id: string, host: string, port = PORT): Promise<void> {
    const r = await reach(server, id, host, port);
    expect(r.answer, `${host}:${port}`).to.equal("refused");
    expect(r.seconds, `${host}:${port} refused at once`).to.be.below(1);
  }

  async function reached(server: RockProcess, id: string, host: string): Promise<void> {
    expect((await reach(server, id, host)).answer, host).to.match(/^reached /);
  }

  /** Stops a server as a service manager does, and waits for its end. */
  async function stop(server: RockProcess): Promise<void> {
    process.kill(server.pid, "SIGTERM");
    expect((await server.exited).code).to.equal(0);
  }

  const uplinks = (): string[] => net.devices().filter((d) => d.startsWith("rk"));

  it("refuses the host's loopback, its own address and the service's port, and a link-local address, each within a second", async () => {
    const server = await serving();
    const id = await newSession(server);
    await refused(server, id, "127.0.0.1");
    await refused(server, id, net.hostAddress);
    await refused(server, id, net.controlAddress, server.port);
    await refused(server, id, "127.0.0.1", server.port);
    await refused(server, id, net.linkLocalAddress);
    // The same listeners answer the host itself: the refusals are the sessions'.
    expect(net.exec(net.host, ["bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/${PORT}; head -1 <&3`]).trim()).to.equal("reached 127.0.0.1");
  });

  it("reaches a private address, and a name resolved through the resolver on the host's loopback", async () => {
    const server = await serving();
    const id = await newSession(server);
    await reached(server, id, net.privateAddress);
    expect(await evaluate(server, id, "utils::nsl('db.example.test')")).to.equal(net.privateAddress);
    expect((await reach(server, id, "db.example.test")).answer).to.equal(`reached ${net.privateAddress}`);
  });

  it("evaluates makePSOCKcluster(2) in the session: its own loopback is its own", async () => {
    const server = await serving();
    const id = await newSession(server);
    const pids = await evaluate<number[]>(
      server,
      id,
      "cl <- parallel::makePSOCKcluster(2); pids <- unlist(parallel::clusterEvalQ(cl, Sys.getpid())); parallel::stopCluster(cl); pids",
    );
    expect(new Set(pids).size).to.equal(2);
  });

  it("opens what r.sessionNetworkAllow names (a listener of the host) and closes what r.sessionNetworkDeny names (a private one)", async () => {
    const server = await serving({
      ROCK_R_SESSION_NETWORK_ALLOW: `${net.hostAddress}:${PORT}`,
      ROCK_R_SESSION_NETWORK_DENY: `${net.privateAddress}/32`,
    });
    const id = await newSession(server);
    expect((await reach(server, id, net.hostAddress)).answer).to.equal(`reached ${net.hostAddress}`);
    await refused(server, id, net.privateAddress);
    // Only that port of the host is opened.
    await refused(server, id, net.hostAddress, server.port);
  });

  it("says which policy sessions have: GET /rserver, /_info and the metric", async () => {
    const server = await serving();
    expect((await rest(server.url, "GET", "/_info")).json<{ sessionNetwork: string }>().sessionNetwork).to.equal("restricted");
    expect((await rest(server.url, "GET", "/rserver", admin)).json<{ sessionNetwork: string }>().sessionNetwork).to.equal("restricted");
    expect((await rest(server.url, "GET", "/metrics", admin)).text).to.include('rock_r_session_network{policy="restricted"} 1');
  });

  it("keeps the policy over a suspend and resume, a restart of R and one of the service; a clean stop removes its table and uplink", async () => {
    const server = await serving();
    const id = await newSession(server);
    const suspended = await rest(server.url, "POST", `/r/session/${id}/_suspend`, admin);
    expect(suspended.status, suspended.text).to.equal(204);
    await refused(server, id, net.linkLocalAddress);
    await reached(server, id, net.privateAddress);
    await refused(server, id, net.hostAddress);

    // The R server stopped and started again forks onto the same router.
    expect((await rest(server.url, "DELETE", "/rserver", admin)).status).to.equal(200);
    expect((await rest(server.url, "PUT", "/rserver", admin)).status).to.equal(200);
    const after = await newSession(server);
    await refused(server, after, net.linkLocalAddress);
    await reached(server, after, net.privateAddress);

    await stop(server);
    expect(net.tables().filter((t) => t.includes(server.uids))).to.deep.equal([]);
    expect(uplinks()).to.deep.equal([]);

    // On the first's folder, which the first's kill() removes once this one ended (afterEach).
    const again = await serving({}, { dataDir: server.dataDir, uids: server.uids, port: server.port });
    const next = await newSession(again);
    await refused(again, next, net.linkLocalAddress);
    await refused(again, next, net.hostAddress);
    await reached(again, next, net.privateAddress);
  });

  it("keeps two servers' rules apart: each range its own table and uplink, one stopping leaves the other's", async () => {
    const first = await serving();
    const second = await serving({ ROCK_R_SESSION_NETWORK_DENY: `${net.privateAddress}/32` });
    expect(first.uids).to.not.equal(second.uids);
    expect(net.tables()).to.include.members([`table inet rock-ts-${first.uids}`, `table inet rock-ts-${second.uids}`]);
    expect(uplinks()).to.have.length(2);
    const [one, two] = [await newSession(first), await newSession(second)];
    await reached(first, one, net.privateAddress);
    await refused(second, two, net.privateAddress);

    await stop(first);
    expect(net.tables()).to.include(`table inet rock-ts-${second.uids}`);
    expect(net.tables()).to.not.include(`table inet rock-ts-${first.uids}`);
    await refused(second, two, net.privateAddress);
    await refused(second, two, net.linkLocalAddress);
  });

  it("leaves a session process that outlives a SIGKILLed service no network; the next start cleans up", async () => {
    const server = await serving();
    const id = await newSession(server);
    await evaluate(server, id, "system('setsid sleep 300 </dev/null >/dev/null 2>&1 &'); TRUE");
    server.noteRServer();
    process.kill(server.pid, "SIGKILL");
    await server.exited;
    const [first, last] = server.uids.split("-").map(Number) as [number, number];
    const sessionPids = (): number[] =>
      execFileSync("ps", ["-e", "-o", "pid=,uid=,stat=,comm="], { encoding: "utf8" })
        .trim()
        .split("\n")
        .map((line) => line.trim().split(/\s+/))
        .filter(([, uid, stat, comm]) => Number(uid) >= first && Number(uid) <= last && !stat?.startsWith("Z") && comm === "sleep")
        .map(([pid]) => Number(pid));
    const sleeper = sessionPids()[0];
    expect(sleeper, "the session's sleep outlived the service").to.be.a("number");
    const devicesOf = (pid: number): string[] =>
      execFileSync("nsenter", ["-t", String(pid), "-n", "ip", "-o", "link"], { encoding: "utf8" })
        .split("\n")
        .filter(Boolean)
        .map((line) => line.split(":")[1]!.trim().split("@")[0]!);
    // The R server ends once the service is gone, and the router with it.
    await until(() => devicesOf(sleeper!).length === 1, 10_000);
    expect(devicesOf(sleeper!)).to.deep.equal(["lo"]);
    expect(uplinks()).to.deep.equal([]);
    expect(net.tables(), "the table stays: it opens nothing").to.include(`table inet rock-ts-${server.uids}`);

    const again = await serving({}, { dataDir: server.dataDir, uids: server.uids, port: server.port });
    expect(sessionPids(), "the dead run's session processes are ended").to.deep.equal([]);
    expect(net.tables().filter((t) => t.includes(server.uids))).to.have.length(1);
    expect(uplinks()).to.have.length(1);
    const next = await newSession(again);
    await refused(again, next, net.linkLocalAddress);
    await reached(again, next, net.privateAddress);
  });

  describe("where CAP_NET_ADMIN is missing", () => {
    /** The server started without CAP_NET_ADMIN (root's effective set after exec is its bounding set). */
    const withoutNetAdmin = (): readonly string[] => [...net.runner, "setpriv", "--bounding-set", "-net_admin"];

    it("auto starts with a warning naming the reason, and reports `host`", async () => {
      const server = await serving({ ROCK_R_SESSION_NETWORK: "auto" }, { runner: withoutNetAdmin() });
      expect(server.log()).to.match(/R sessions have the host's network \(r\.sessionNetwork auto\): .*CAP_NET_ADMIN/);
      expect((await rest(server.url, "GET", "/_info")).json<{ sessionNetwork: string }>().sessionNetwork).to.equal("host");
      expect(net.tables().filter((t) => t.includes(server.uids))).to.deep.equal([]);
    });

    it("restricted refuses to start, naming what is missing and how to provide it", async () => {
      const data = mkdtempSync(join(tmpdir(), "rock-network-"));
      const run = await runMain([], {
        command: [...withoutNetAdmin(), process.execPath, "--import", "tsx", "src/main.ts"],
        env: {
          ROCK_DATA_DIR: data,
          ROCK_PORT: "0",
          ROCK_HOST: "127.0.0.1",
          ROCK_R_START: "false",
          ROCK_R_SESSION_NETWORK: "restricted",
          ROCK_ADMINISTRATOR_NAME: "a",
          ROCK_ADMINISTRATOR_PASSWORD: "b",
          ROCK_R_SESSION_UIDS: uidsVariable(testSessionUids()),
        },
        timeoutMs: 30_000,
      }).finally(() => rmSync(data, { recursive: true, force: true }));
      expect(run.code, run.stderr).to.equal(1);
      expect(run.stderr).to.include("r.sessionNetwork is 'restricted' but the sessions' router and filter need CAP_NET_ADMIN");
      expect(run.stderr).to.include("--cap-add NET_ADMIN");
    });
  });
});
