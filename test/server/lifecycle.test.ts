/**
 * Stopping and starting the real server process: SIGTERM drains (health NOT_SERVING, `/_check` 500,
 * new work 503, running calls finish, then R, LevelDB and the listener close and the process exits 0), a second
 * signal or the drain time ends the drain, and a session asked for while R starts waits for it.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { expect } from "chai";
import { HealthCheckResponse_ServingStatus as Status } from "../../gen/es/grpc/health/v1/health_pb.js";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { Health } from "../../src/server/health.js";
import { connectClient } from "../support/clients.js";
import { basic } from "../support/server.js";
import { spawnRock, untilAnswers, type RockProcess } from "../support/rock-process.js";

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

async function rest(server: RockProcess, method: string, path: string, user?: string, body?: string): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (user) headers.authorization = basic(user);
  if (body !== undefined) headers["content-type"] = "application/x-rscript";
  const res = await fetch(server.url + path, { method, headers, body });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

async function newSession(server: RockProcess): Promise<string> {
  const created = await rest(server, "POST", "/r/sessions", "user");
  expect(created.status, created.text).to.equal(201);
  return (JSON.parse(created.text) as { id: string }).id;
}

/** Starts an evaluation; resolves once R runs it (the session is busy), with the answer to come. */
async function evaluating(server: RockProcess, id: string, script: string): Promise<{ answer: Promise<Answer> }> {
  const answer = rest(server, "POST", `/r/session/${id}/_eval`, "user", script);
  answer.catch(() => undefined);
  const end = Date.now() + 10_000;
  while (!(JSON.parse((await rest(server, "GET", `/r/session/${id}`, "user")).text) as { busy: boolean }).busy) {
    if (Date.now() > end) throw new Error("the evaluation did not start");
    await new Promise((r) => setTimeout(r, 20));
  }
  return { answer };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A started server with R running, one session evaluating `script`, the pids to look for afterwards and
 * the session's working folder (as R and this process both see it).
 */
async function serverEvaluating(env: Record<string, string>, script: string) {
  const server = await spawnRock({ ROCK_R_START: "true", ...env });
  try {
    await untilAnswers(server.url, "/_check", 200);
  } catch (e) {
    await server.kill();
    throw new Error(`${(e as Error).message}; the server said: ${server.log().slice(-2000)}`);
  }
  const rServer = server.noteRServer();
  expect(rServer, "the R server's process group").to.be.a("number");
  const id = await newSession(server);
  const sessionPid = Number((await rest(server, "POST", `/r/session/${id}/_eval`, "user", "Sys.getpid()")).text);
  expect(sessionPid).to.be.greaterThan(0);
  const workDir = JSON.parse((await rest(server, "POST", `/r/session/${id}/_eval`, "user", "getwd()")).text) as string;
  const { answer } = await evaluating(server, id, script);
  return { server, id, sessionPid, workDir, answer };
}

/** Nothing of R is left: no member of the R server's group, no process of a session uid, the session gone. */
async function expectNoR(server: RockProcess, sessionPid: number): Promise<void> {
  // An R process SIGKILLed a moment ago may not be reaped yet.
  const end = Date.now() + 3_000;
  while ((server.leftovers().length > 0 || alive(sessionPid)) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  expect(server.leftovers(), "R processes left").to.deep.equal([]);
  expect(alive(sessionPid), "the session's process").to.equal(false);
}

describe("stopping on SIGTERM", function () {
  this.timeout(90_000);
  let server: RockProcess | undefined;

  afterEach(async () => {
    await server?.kill();
    server = undefined;
  });

  it("drains: NOT_SERVING, /_check 500 and new work 503 at once, the running eval completes, then R ends and the process exits 0", async () => {
    // The evaluation runs until the test has seen the drain (a file it writes then), 10 s at most.
    const started = await serverEvaluating({}, "for (i in 1:500) if (file.exists('drain-seen')) break else Sys.sleep(0.02); 42");
    server = started.server;
    const health = connectClient(Health, server.port, "grpc");
    const watched: Status[] = [];
    const watch = (async () => {
      for await (const res of health.watch({ service: "rock.r.v1.RService" })) {
        watched.push(res.status);
        if (res.status === Status.NOT_SERVING) return;
      }
    })();
    const end = Date.now() + 5_000;
    while (watched.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    expect(watched).to.deep.equal([Status.SERVING]);

    const signalled = Date.now();
    process.kill(server.pid, "SIGTERM");
    // `/_check` answers 200 or 500 (reference-behaviour §1.5, Decision): no 503 there, no Retry-After.
    await untilAnswers(server.url, "/_check", 500, 1_000);
    expect(Date.now() - signalled, "500 at once").to.be.lessThan(1_000);
    const check = await rest(server, "GET", "/_check");
    expect([check.status, check.headers.get("retry-after")]).to.deep.equal([500, null]);
    expect(JSON.parse(check.text)).to.deep.equal({ status: "500", key: "internal", args: [], message: "The service is stopping" });
    const grpcCheck = await connectClient(RService, server.port, "grpc")
      .check({})
      .then(
        () => Code.Unknown,
        (e: unknown) => ConnectError.from(e).code,
      );
    expect(Code[grpcCheck]).to.equal(Code[Code.Internal]);
    // `/_info` lists 200 and 500 only; what it says stays true while the service stops.
    const info = await rest(server, "GET", "/_info");
    expect(info.status, info.text).to.equal(200);
    expect((JSON.parse(info.text) as { type: string }).type).to.equal("rock");
    expect((await health.check({ service: "" })).status).to.equal(Status.NOT_SERVING);
    expect((await health.check({ service: "rock.networks.v1.NetworkService" })).status).to.equal(Status.NOT_SERVING);
    expect(Object.values((await health.list({})).statuses).map((s) => s.status)).to.satisfy(
      (all: Status[]) => all.length > 0 && all.every((s) => s === Status.NOT_SERVING),
    );
    await watch;
    expect(watched).to.deep.equal([Status.SERVING, Status.NOT_SERVING]);

    const refused = await rest(server, "POST", "/r/sessions", "user");
    expect(refused.status).to.equal(503);
    expect(refused.headers.get("retry-after")).to.match(/^\d+$/);
    expect(JSON.parse(refused.text)).to.deep.include({ status: "503", key: "unavailable" });
    expect((JSON.parse(refused.text) as { message: string }).message).to.match(/stopping/);
    const catalogue = await rest(server, "GET", "/ws/draft/networks", "admin");
    expect(catalogue.status).to.equal(503);
    // A client with a session may still look at it (and finish its work there).
    expect((await rest(server, "GET", `/r/session/${started.id}`, "user")).status).to.equal(200);
    expect(server.log(), "still draining").not.to.match(/drained/);
    writeFileSync(join(started.workDir, "drain-seen"), "");

    const answer = await started.answer;
    expect(answer.status, answer.text).to.equal(200);
    expect(answer.text).to.equal("42");
    const exit = await server.exited;
    expect(exit).to.deep.include({ code: 0, signal: null });
    // Nothing ran once the evaluation ended: the drain did not wait for its 30 s.
    expect(exit.at - signalled).to.be.lessThan(10_000);
    expect(server.log()).to.match(/drained/);
    await expectNoR(server, started.sessionPid);
  });

  it("ends the drain at once on a second signal", async () => {
    const started = await serverEvaluating({}, "Sys.sleep(30); 1");
    server = started.server;
    process.kill(server.pid, "SIGTERM");
    await untilAnswers(server.url, "/_check", 500, 1_000);
    await new Promise((r) => setTimeout(r, 500));
    expect(server.log()).not.to.match(/drain/);
    const again = Date.now();
    process.kill(server.pid, "SIGTERM");
    const exit = await server.exited;
    expect(exit).to.deep.include({ code: 0, signal: null });
    expect(exit.at - again).to.be.lessThan(4_000);
    const answer = await started.answer.catch(() => undefined);
    if (answer) expect(answer.status, answer.text).to.equal(503);
    expect(server.log()).to.match(/drain cut short/);
    await expectNoR(server, started.sessionPid);
  });

  it("stops running calls once the drain time is over", async () => {
    const started = await serverEvaluating({ ROCK_DRAIN_SECONDS: "1" }, "Sys.sleep(30); 1");
    server = started.server;
    const signalled = Date.now();
    process.kill(server.pid, "SIGTERM");
    const answer = await started.answer.catch(() => undefined);
    // The evaluation had its drain time, not more: it was stopped after 1 s, not at once, not after 30.
    expect(Date.now() - signalled).to.be.within(900, 3_000);
    const exit = await server.exited;
    expect(exit).to.deep.include({ code: 0, signal: null });
    expect(exit.at - signalled).to.be.within(900, 5_000);
    // The call gets an error: 503 when its connection is still there to carry it.
    if (answer) {
      expect(answer.status, answer.text).to.equal(503);
      expect(answer.headers.get("retry-after")).to.match(/^\d+$/);
    }
    expect(server.log()).to.match(/drain time over/);
    await expectNoR(server, started.sessionPid);
  });
});

describe("starting", function () {
  this.timeout(90_000);
  let server: RockProcess | undefined;

  afterEach(async () => {
    await server?.kill();
    server = undefined;
  });

  /** A profile that makes R's start take a second, so the service answers long before R is ready. */
  function slowProfile(dir: string): string {
    const file = join(dir, "slow-profile.R");
    writeFileSync(file, "Sys.sleep(1)\n", { mode: 0o600 });
    return file;
  }

  /** Spawns with R starting at boot and asks for a session as soon as /_info answers. */
  async function sessionAtStart(env: Record<string, string>): Promise<{ first: Answer; server: RockProcess }> {
    const spawned = await spawnRock({ ROCK_R_START: "true", ...env });
    server = spawned;
    await untilAnswers(spawned.url, "/_info", 200);
    return { first: await rest(spawned, "POST", "/r/sessions", "user"), server: spawned };
  }

  it("has a session asked for while R starts wait for R (201), not 500", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rock-profile-"));
    try {
      const { first, server: s } = await sessionAtStart({ ROCK_R_PROFILE: slowProfile(dir) });
      expect(first.status, first.text).to.equal(201);
      const id = (JSON.parse(first.text) as { id: string }).id;
      expect((await rest(s, "POST", `/r/session/${id}/_eval`, "user", "1 + 1")).text).to.equal("2");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("answers 503 with Retry-After, not 500, past r.startWaitSeconds; then serves once R runs", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rock-profile-"));
    try {
      const { first, server: s } = await sessionAtStart({ ROCK_R_PROFILE: slowProfile(dir), ROCK_R_START_WAIT_SECONDS: "0" });
      expect(first.status, first.text).to.equal(503);
      expect(first.headers.get("retry-after")).to.match(/^\d+$/);
      expect((JSON.parse(first.text) as { message: string }).message).to.match(/R server is starting/);
      await untilAnswers(s.url, "/_check", 200);
      expect((await rest(s, "POST", "/r/sessions", "user")).status).to.equal(201);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
