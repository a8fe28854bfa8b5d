import { expect } from "chai";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { startRock, type Rock } from "../../src/compose.js";
import type { Config } from "../../src/config/config.js";
import { liveProcessesByUid } from "../../src/r/confine/processes.js";
import type { Logger } from "../../src/server/logger.js";
import { connectClient, rest, type RestAnswer } from "../support/clients.js";
import { processes } from "../support/procfs.js";
import { testConfig, type ConfigPatch } from "../support/server.js";
import { testSessionUids } from "../support/uids.js";
import { until } from "./support.js";

const RSCRIPT = { "content-type": "application/x-rscript", accept: "application/json" };
const admin = { user: "admin", password: "admin" };
const user = { user: "user", password: "user" };
const user2 = { user: "user2", password: "user2" };
const root = process.getuid?.() === 0;

interface Server {
  readonly rock: Rock;
  readonly url: string;
  readonly port: number;
  readonly lines: Array<{ msg: string; fields?: Record<string, unknown> }>;
}

/** A server on `dataDir` (kept by stop(): a restart finds it again), its service log kept in `lines`. */
async function start(dataDir: string, patch: Omit<ConfigPatch, "logger">): Promise<Server> {
  const lines: Server["lines"] = [];
  const keep =
    (): Logger[keyof Logger] =>
    (msg, fields): void =>
      void lines.push({ msg, ...(fields ? { fields } : {}) });
  const logger: Logger = { info: keep(), warn: keep(), error: keep() };
  const config: Config = testConfig(dataDir, patch);
  const rock = await startRock(config, { logger, announce: () => {} });
  return { rock, url: `http://127.0.0.1:${rock.port}`, port: rock.port, lines };
}

async function open(server: Server, who = user): Promise<string> {
  const created = await rest(server.url, "POST", "/r/sessions", who);
  expect(created.status, created.text).to.equal(201);
  return created.json<{ id: string }>().id;
}

const evaluate = (server: Server, id: string, code: string, who = user): Promise<RestAnswer> =>
  rest(server.url, "POST", `/r/session/${id}/_eval`, { ...who, headers: RSCRIPT, body: code });

async function value<T>(server: Server, id: string, code: string, who = user): Promise<T> {
  const answer = await evaluate(server, id, code, who);
  expect(answer.status, answer.text).to.equal(200);
  return answer.json<T>();
}

const suspend = (server: Server, id: string, who = user): Promise<RestAnswer> => rest(server.url, "POST", `/r/session/${id}/_suspend`, who);

async function sessionOf(server: Server, id: string): Promise<{ suspended: boolean; busy: boolean; createdDate: string }> {
  const got = await rest(server.url, "GET", `/r/session/${id}`, admin);
  expect(got.status, got.text).to.equal(200);
  return got.json();
}

/** The uid an isolated session's process runs as. */
async function uidOf(server: Server, id: string, who = user): Promise<number> {
  const pid = await value<number>(server, id, "Sys.getpid()", who);
  return processes().find((p) => p.pid === pid)!.uid;
}

/** What the session's global environment holds, with everything the tests compare after a resume. */
const STATE = `
  v <- c(1.5, NA, -Inf, 3)
  df <- data.frame(n = 1:3, f = factor(c("b", "a", "b"), levels = c("b", "a", "c")))
  l <- structure(list(a = 1L, b = list("x", TRUE)), class = "mine", note = "kept")
  .hidden <- "dot"
  make <- function() { n <- 0; list(add = function() n <<- n + 1, get = function() n) }
  counter <- make(); counter$add()
  set.seed(7); invisible(runif(2))
  library(stats4)
  options(rock.test.option = 42L)
  Sys.setenv(ROCK_TEST_VAR = "set by the user")
  dir.create("sub"); setwd("sub"); writeLines("in sub", "file.txt")
  con <- file(tempfile(), "w")
  saveRDS(list(v = v, df = df, l = l), "../expected.rds")
  TRUE`;

describe("sessions that outlive their process: suspend, resume, restart", function () {
  this.timeout(120_000);
  const folders: string[] = [];
  const servers: Server[] = [];
  const folder = (): string => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rock-suspend-"));
    fs.chmodSync(dir, 0o711);
    folders.push(dir);
    return dir;
  };
  const serve = async (dataDir: string, patch: Omit<ConfigPatch, "logger"> = {}): Promise<Server> => {
    const server = await start(dataDir, { ...patch, r: { startOnBoot: true, spareSessions: 0, ...patch.r } });
    servers.push(server);
    return server;
  };
  const stop = async (server: Server): Promise<void> => {
    servers.splice(servers.indexOf(server), 1);
    await server.rock.close();
  };
  afterEach(async () => {
    for (const server of servers.splice(0)) await server.rock.close();
    for (const dir of folders.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("keeps every value, the packages, options, variables, folder and RNG across a suspend; its process and uid are gone meanwhile", async () => {
    const server = await serve(folder());
    const id = await open(server);
    expect(await value(server, id, STATE)).to.equal(true);
    const uid = root ? await uidOf(server, id) : undefined;
    // With quotas, its memory's control group (cgroup v1's memory hierarchy, or v2's one).
    const pid = await value<number>(server, id, "Sys.getpid()");
    const cgroup = fs.readFileSync(`/proc/${pid}/cgroup`, "utf8");
    const v1 = /^\d+:memory:(.*rock-sessions.*)$/m.exec(cgroup)?.[1];
    const v2 = /^0::(.*rock-sessions.*)$/m.exec(cgroup)?.[1];
    const group = v1 ? `/sys/fs/cgroup/memory${v1}` : v2 ? `/sys/fs/cgroup${v2}` : undefined;
    const next = await value<number[]>(server, id, "s <- .Random.seed; x <- runif(3); assign('.Random.seed', s, globalenv()); x");

    const before = await sessionOf(server, id);
    expect(before.suspended).to.equal(false);
    const suspended = await suspend(server, id);
    expect(suspended.status, suspended.text).to.equal(204);
    const during = await sessionOf(server, id);
    expect(during.suspended).to.equal(true);
    expect(during.createdDate).to.equal(before.createdDate);
    if (uid !== undefined) expect((await liveProcessesByUid((u) => u === uid)).has(uid), "a process of its uid").to.equal(false);
    if (group) expect(fs.existsSync(group), "its memory's control group").to.equal(false);
    const logged = server.lines.find((l) => l.msg === "R session suspended");
    expect(logged?.fields?.notSaved, "what could not be saved, in the service log").to.deep.equal(["con (a connection, not restored)"]);

    // The next call resumes it.
    expect(await value(server, id, "identical(list(v = v, df = df, l = l), readRDS('../expected.rds'))")).to.equal(true);
    expect((await sessionOf(server, id)).suspended).to.equal(false);
    expect(await value(server, id, "runif(3)")).to.deep.equal(next);
    expect(await value(server, id, "c(.hidden, class(l), attr(l, 'note'))")).to.deep.equal(["dot", "mine", "kept"]);
    expect(await value(server, id, "counter$add(); counter$get()")).to.equal(2);
    expect(await value(server, id, "'package:stats4' %in% search() && search()[2] == 'package:stats4'")).to.equal(true);
    expect(await value(server, id, "getOption('rock.test.option')")).to.equal(42);
    expect(await value(server, id, "Sys.getenv('ROCK_TEST_VAR')")).to.equal("set by the user");
    expect(await value(server, id, "c(basename(getwd()), readLines('file.txt'))")).to.deep.equal(["sub", "in sub"]);
    expect(await value(server, id, "exists('con')")).to.equal(false);
    const log = await rest(server.url, "GET", "/rserver/_log", admin);
    expect(log.text).to.match(/R session resumed from its state of .*; not restored: con \(a connection, not restored\)/);
  });

  it("resumes for a command, an Execute stream, an assign and a file, and answers the suspended field over gRPC", async () => {
    const server = await serve(folder());
    const id = await open(server);
    await value(server, id, "x <- 41; writeLines('kept', 'f.txt')");
    const client = connectClient(RService, server.port, "grpc", "user");
    expect((await suspend(server, id)).status).to.equal(204);
    expect((await client.getSession({ id })).session?.suspended).to.equal(true);
    const listed = (await rest(server.url, "GET", "/r/sessions", user)).json<Array<{ id: string; suspended: boolean }>>();
    expect(listed.find((s) => s.id === id)?.suspended).to.equal(true);

    const download = await rest(server.url, "GET", `/r/session/${id}/_download?path=f.txt`, user);
    expect(download.status, download.text).to.equal(200);
    expect(download.text).to.equal("kept\n");

    expect((await suspend(server, id)).status).to.equal(204);
    const command = await rest(server.url, "POST", `/r/session/${id}/_eval?async=true`, { ...user, headers: RSCRIPT, body: "x + 1" });
    expect(command.status, command.text).to.equal(201);
    const { id: cmd } = command.json<{ id: string }>();
    const result = await rest(server.url, "GET", `/r/session/${id}/command/${cmd}/result?wait=true`, {
      ...user,
      headers: { accept: "application/json" },
    });
    expect(result.text).to.equal("42");

    expect((await suspend(server, id)).status).to.equal(204);
    const events = [];
    for await (const event of client.execute({ id, script: { contentType: "application/x-rscript", data: Buffer.from("print(x); x") } }))
      events.push(event.event);
    expect(
      events
        .filter((e) => e.case === "output")
        .map((e) => e.value)
        .join(""),
    ).to.equal("[1] 41\n");
    expect(events.at(-1)?.case).to.equal("json");

    expect((await suspend(server, id)).status).to.equal(204);
    const assigned = await rest(server.url, "POST", `/r/session/${id}/_assign?s=y`, {
      ...user,
      headers: { "content-type": "application/x-rscript" },
      body: "x * 2",
    });
    expect(assigned.status, assigned.text).to.equal(200);
    expect(await value(server, id, "y")).to.equal(82);
  });

  it("lets the owner, an administrator or a manager suspend, nobody else; ending a suspended session removes its files", async () => {
    const dataDir = folder();
    const server = await serve(dataDir);
    const id = await open(server);
    expect((await suspend(server, id, user2)).status).to.equal(403);
    expect((await suspend(server, id, { user: "manager", password: "manager" })).status).to.equal(204);
    expect((await suspend(server, "no-such-session", admin)).status).to.equal(404);
    const home = path.join(dataDir, "sessions", id);
    expect(fs.existsSync(path.join(home, "session.state"))).to.equal(true);
    expect((await rest(server.url, "DELETE", `/r/session/${id}`, user)).status).to.equal(204);
    // Its end goes on after the answer.
    await until(() => !fs.existsSync(home) && fs.readdirSync(path.join(dataDir, "r-sessions")).length === 0);
  });

  it("suspends a session idle r.suspendIdleMinutes on its own, and checkpoints one idle r.checkpointIdleSeconds without ending it", async () => {
    const server = await serve(folder(), { r: { suspendIdleMinutes: 2 / 60, checkpointIdleSeconds: 1 } });
    const id = await open(server);
    await value(server, id, "z <- 'idle'");
    await until(() => server.lines.some((l) => l.msg === "R session checkpointed" && l.fields?.session === id), 10_000);
    expect((await sessionOf(server, id)).suspended).to.equal(false);
    await until(() => server.lines.some((l) => l.msg === "R session idle, suspended" && l.fields?.session === id), 15_000);
    expect((await sessionOf(server, id)).suspended).to.equal(true);
    expect(await value(server, id, "z")).to.equal("idle");
  });

  it("comes back after a restart with the same data folder: values, dates and finished commands; a command that was running failed", async () => {
    const dataDir = folder();
    const first = await serve(dataDir);
    const id = await open(first);
    await value(first, id, "kept <- data.frame(a = letters[1:3], stringsAsFactors = TRUE)");
    const done = (
      await rest(first.url, "POST", `/r/session/${id}/_eval?async=true`, { ...user, headers: RSCRIPT, body: "nrow(kept)" })
    ).json<{ id: string }>();
    await until(
      async () => (await rest(first.url, "GET", `/r/session/${id}/command/${done.id}`, user)).json<{ finished: boolean }>().finished,
    );
    const running = (
      await rest(first.url, "POST", `/r/session/${id}/_eval?async=true`, { ...user, headers: RSCRIPT, body: "Sys.sleep(60)" })
    ).json<{ id: string }>();
    const created = (await sessionOf(first, id)).createdDate;
    await stop(first);

    const second = await serve(dataDir);
    const back = await sessionOf(second, id);
    expect(back.suspended).to.equal(true);
    expect(back.createdDate).to.equal(created);
    const commands = (await rest(second.url, "GET", `/r/session/${id}/commands`, user)).json<
      Array<{ id: string; status: string; error?: string }>
    >();
    expect(commands.find((c) => c.id === done.id)?.status).to.equal("COMPLETED");
    const failed = commands.find((c) => c.id === running.id);
    expect(failed?.status).to.equal("FAILED");
    expect(failed?.error).to.match(/stopped/);
    const result = await rest(second.url, "GET", `/r/session/${id}/command/${done.id}/result`, {
      ...user,
      headers: { accept: "application/json" },
    });
    expect(result.text).to.equal("3");
    expect(await value(second, id, "levels(kept$a)")).to.deep.equal(["a", "b", "c"]);
    expect(second.lines.some((l) => /R sessions of the previous run: 1 back/.test(l.msg))).to.equal(true);
  });

  it("keeps a suspended session's files from the next session of its uid, and its memory out of the sessions' usage", async function () {
    if (!root) this.skip();
    const dataDir = folder();
    // One uid: the next session gets the suspended one's. The host's files in view, so only the
    // ownership of the suspended session's folder keeps them out of reach.
    const { first } = testSessionUids();
    const uids = { first, last: first };
    const server = await serve(dataDir, { r: { sessionUids: uids, sessionFilesystem: "host", maxSessions: 2 } });
    const id = await open(server);
    await value(server, id, "writeLines('secret', 'private.txt'); x <- runif(26214400); TRUE");
    const status = async () =>
      (await rest(server.url, "GET", "/rserver", admin)).json<{
        sessions: { total: number; suspended: number; memoryBytes?: number; usage: Array<{ id: string }> };
      }>();
    const before = (await status()).sessions;
    if (before.usage.length > 0) expect(before.usage.map((u) => u.id)).to.include(id);
    expect((await suspend(server, id)).status).to.equal(204);
    const counts = (await status()).sessions;
    // With quotas: the sessions' memory falls with the process, the state file's page cache not counted.
    if (before.memoryBytes !== undefined) {
      expect(before.memoryBytes, "200 MiB held").to.be.greaterThan(200 * 1048576);
      expect(counts.memoryBytes, "after the suspend").to.be.lessThan(64 * 1048576);
    }
    expect(counts.suspended).to.equal(1);
    expect(counts.total, "a suspended session counts toward r.maxSessions").to.equal(1);
    expect(counts.usage.map((u) => u.id)).to.not.include(id);

    const other = await open(server, user2);
    expect(await uidOf(server, other, user2)).to.equal(uids.first);
    const file = path.join(dataDir, "sessions", id, "work", "private.txt");
    const read = await evaluate(server, other, `readLines(${JSON.stringify(file)})`, user2);
    expect(read.status, read.text).to.equal(400);
    const listed = await evaluate(server, other, `list.files(${JSON.stringify(path.dirname(file))})`, user2);
    expect(listed.json(), "not even listed").to.deep.equal([]);
    // Its uid is busy: the suspended session cannot come back before the other ends (429), then can.
    expect((await evaluate(server, id, "x")).status).to.equal(429);
    expect((await rest(server.url, "DELETE", `/r/session/${other}`, user2)).status).to.equal(204);
    expect(await value(server, id, "readLines('private.txt')")).to.equal("secret");
  });

  it("ends a suspended session idle r.sessionTimeoutMinutes, with its files", async () => {
    const dataDir = folder();
    const server = await serve(dataDir, { r: { sessionTimeoutMinutes: 2 / 60, sessionCheckSeconds: 1 } });
    const id = await open(server);
    expect((await suspend(server, id)).status).to.equal(204);
    await until(async () => (await rest(server.url, "GET", `/r/session/${id}`, admin)).status === 404, 15_000);
    // The session is gone from the list as it ends; its folders and its record go right after
    // (Session.end), so they are waited for too, not checked at the 404.
    await until(
      () => !fs.existsSync(path.join(dataDir, "sessions", id)) && fs.readdirSync(path.join(dataDir, "r-sessions")).length === 0,
      5_000,
    );
  });

  it("ends the suspended session idle longest once the saved states pass r.suspendedMaxMb, saying so", async () => {
    const server = await serve(folder(), { r: { suspendedMaxMb: 3 } });
    const [older, newer] = [await open(server), await open(server)];
    for (const id of [older, newer]) {
      await value(server, id, "big <- runif(250000); TRUE");
      expect((await suspend(server, id)).status).to.equal(204);
    }
    expect((await rest(server.url, "GET", `/r/session/${older}`, admin)).status).to.equal(404);
    expect((await sessionOf(server, newer)).suspended).to.equal(true);
    const said = server.lines.find((l) => l.fields?.session === older && /r\.suspendedMaxMb/.test(l.msg));
    expect(said?.msg).to.include("3 MiB");
    expect(await value(server, newer, "length(big)")).to.equal(250000);
  });

  it("fails only the resume of a session whose saved state was tampered with (500 naming it); the service and other sessions go on", async () => {
    const dataDir = folder();
    const server = await serve(dataDir);
    const [bad, good] = [await open(server), await open(server)];
    await value(server, bad, "x <- 1");
    await value(server, good, "y <- 2");
    expect((await suspend(server, bad)).status).to.equal(204);
    expect((await suspend(server, good)).status).to.equal(204);
    const state = path.join(dataDir, "sessions", bad, "session.state");
    const bytes = fs.readFileSync(state);
    bytes.fill(0x41, 40, 400);
    fs.writeFileSync(state, bytes);
    const answer = await evaluate(server, bad, "x");
    expect(answer.status, answer.text).to.equal(500);
    expect(answer.json<{ message: string }>().message).to.include(`R session ${bad} could not be resumed`);
    expect((await sessionOf(server, bad)).suspended, "still there, with its state").to.equal(true);
    expect(await value(server, good, "y")).to.equal(2);
    expect((await rest(server.url, "GET", "/_check")).status).to.equal(200);
  });
});
