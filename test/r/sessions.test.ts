import { expect } from "chai";
import { Fault } from "../../src/errors/fault.js";
import { create } from "@bufbuild/protobuf";
import { existsSync, readdirSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { HttpBodySchema } from "../../gen/es/google/api/httpbody_pb.js";
import type { RSession } from "../../src/r/session/session.js";
import { commandMessage, sessionMessage } from "../../src/r/service/messages.js";
import { processes, type ProcStat } from "../support/procfs.js";
import { caller, ctxOf, startRig, text, until, type Rig } from "./support.js";
import type { EngineEvent } from "../../src/r/engine/engine.js";

const body = (script: string) => create(HttpBodySchema, { contentType: "application/x-rscript", data: text(script) });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("R sessions and commands", function () {
  this.timeout(60_000);
  let rig: Rig;
  const alice = caller("alice", "user");
  const bob = caller("bob", "user");
  const admin = caller("root", "administrator");
  const manager = caller("mgr", "manager");

  before(async () => {
    rig = await startRig({ commandWaitSeconds: 5 });
  });
  after(async () => rig?.close());
  afterEach(async () => rig.engine.endAllSessions());

  async function newSession(who = alice): Promise<string> {
    const res = await rig.handlers.createSession!({ $typeName: "rock.r.v1.CreateSessionRequest" }, ctxOf(who));
    return res.session!.id!;
  }

  const evalJson = async (id: string, script: string, who = alice): Promise<string> => {
    const res = await rig.handlers.eval!(
      { $typeName: "rock.r.v1.EvalRequest", id, async: false, accept: "application/json", script: body(script) },
      ctxOf(who),
    );
    return Buffer.from((res.answer?.value as { data: Uint8Array } | undefined)?.data ?? []).toString("utf8");
  };

  const submit = async (id: string, script: string) => {
    const res = await rig.handlers.eval!(
      { $typeName: "rock.r.v1.EvalRequest", id, async: true, accept: "", script: body(script) },
      ctxOf(alice),
    );
    expect(res.answer?.case).to.equal("command");
    return { command: res.answer!.value as { id: string; sessionId: string; status: string; script: string } };
  };

  it("creates sessions with an id, dates and empty isolated folders", async () => {
    const a = await newSession();
    const b = await newSession();
    const session = rig.engine.session(a);
    const proto = sessionMessage(session);
    expect(proto.id).to.match(/^[0-9a-f-]{36}$/);
    expect(proto.createdDate).to.match(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
    expect(proto.busy).to.equal(false);
    await evalJson(a, "x <- 'A'; writeLines('a', 'a.txt')");
    await evalJson(b, "x <- 'B'");
    expect(await evalJson(a, "x")).to.equal('"A"');
    expect(await evalJson(b, "x")).to.equal('"B"');
    expect(await evalJson(b, "list.files()")).to.equal("[]");
    expect(JSON.parse(await evalJson(a, "getwd()"))).to.equal(session.dirs.work);
    expect(JSON.parse(await evalJson(a, "tempdir()"))).to.equal(session.dirs.tmp);
    expect(JSON.parse(await evalJson(a, "dirname(tempfile())"))).to.equal(session.dirs.tmp);
    expect(JSON.parse(await evalJson(b, "tempdir()"))).to.equal(rig.engine.session(b).dirs.tmp);
    expect(await evalJson(a, "ls()")).to.equal('"x"');
    await rig.handlers.deleteSession!({ $typeName: "rock.r.v1.DeleteSessionRequest", id: a }, ctxOf(alice));
    // Unreachable once the delete answered; its end (processes, folders) goes on after the answer.
    expect(() => rig.engine.session(a)).to.throw(/No such R session/);
    await until(() => !existsSync(session.dirs.home));
  });

  it("enforces ownership and lists by role", async () => {
    const a = await newSession(alice);
    await newSession(bob);
    const denied = await evalJson(a, "1", bob).catch((e: unknown) => e);
    expect((denied as Fault).kind).to.equal("forbidden");
    const managerEval = await evalJson(a, "1", manager).catch((e: unknown) => e);
    expect((managerEval as Fault).kind).to.equal("forbidden");
    expect(await evalJson(a, "1", admin)).to.equal("1");
    const got = await rig.handlers.getSession!({ $typeName: "rock.r.v1.GetSessionRequest", id: a }, ctxOf(manager));
    expect(got.session?.subject).to.equal("alice");
    const list = async (who = alice, subject?: string) =>
      (await rig.handlers.listSessions!({ $typeName: "rock.r.v1.ListSessionsRequest", subject }, ctxOf(who))).sessions!;
    expect((await list(alice)).map((s) => s.subject)).to.deep.equal(["alice"]);
    expect(await list(alice, "bob")).to.have.length(1);
    expect((await list(alice, "bob"))[0]!.subject).to.equal("alice");
    expect(await list(manager)).to.have.length(2);
    expect((await list(admin, "bob")).map((s) => s.subject)).to.deep.equal(["bob"]);
    const missing = await Promise.resolve(
      rig.handlers.getSession!({ $typeName: "rock.r.v1.GetSessionRequest", id: "nope" }, ctxOf(admin)),
    ).catch((e: unknown) => e);
    expect((missing as Fault).kind).to.equal("not_found");
    expect((missing as Fault).message).to.equal("No such R session: nope");
  });

  it("runs commands through their whole life: pending, in progress, completed, result with rm", async () => {
    const id = await newSession();
    const first = await submit(id, "Sys.sleep(0.5); 'first'");
    expect(first.command.id).to.equal("1");
    // What the REST Location of an async eval is built from (rest_answer.created).
    expect(first.command.sessionId).to.equal(id);
    const second = await submit(id, "1 + 1");
    expect(second.command).to.include({ id: "2", status: "PENDING", script: "1 + 1" });
    await sleep(100);
    expect(rig.engine.session(id).busy).to.equal(true);
    const get = (cmdId: string, wait = false) =>
      rig.handlers.getCommand!({ $typeName: "rock.r.v1.GetCommandRequest", id, cmdId, wait }, ctxOf(alice));
    expect((await get("1")).command?.status).to.equal("IN_PROGRESS");
    expect((await get("2")).command?.status).to.equal("PENDING");
    const early = await rig.handlers.getCommandResult!(
      { $typeName: "rock.r.v1.GetCommandResultRequest", id, cmdId: "2", wait: false },
      ctxOf(alice),
    );
    expect(early.result).to.equal(undefined);
    const done = (await get("2", true)).command!;
    expect(done).to.include({ status: "COMPLETED", finished: true, withResult: true, withError: false });
    expect(done.createdDate).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$/);
    expect(done.endDate! >= done.startDate!).to.equal(true);
    const keep = await rig.handlers.getCommandResult!(
      { $typeName: "rock.r.v1.GetCommandResultRequest", id, cmdId: "1", rm: false, wait: true },
      ctxOf(alice),
    );
    expect(Buffer.from(keep.result!.data!).toString()).to.equal('"first"');
    const taken = await rig.handlers.getCommandResult!(
      { $typeName: "rock.r.v1.GetCommandResultRequest", id, cmdId: "1", wait: false },
      ctxOf(alice),
    );
    expect(Buffer.from(taken.result!.data!).toString()).to.equal('"first"');
    const gone = await Promise.resolve(get("1")).catch((e: unknown) => e);
    expect((gone as Fault).kind).to.equal("not_found");
    const listed = await rig.handlers.listCommands!({ $typeName: "rock.r.v1.ListCommandsRequest", id }, ctxOf(alice));
    expect(listed.commands!.map((c) => c.id)).to.deep.equal(["2"]);
  });

  it("marks a failed command with its error and answers no result for it", async () => {
    const id = await newSession();
    await submit(id, "stop('nope')");
    const result = await rig.handlers.getCommandResult!(
      { $typeName: "rock.r.v1.GetCommandResultRequest", id, cmdId: "1", rm: false, wait: true },
      ctxOf(alice),
    );
    expect(result.result).to.equal(undefined);
    const command = commandMessage(rig.engine.session(id).commands.get("1")!);
    expect(command).to.include({ status: "FAILED", withError: true, error: "Error: nope", withResult: false });
  });

  it("refuses to assign to a symbol holding NUL, which no R symbol holds", async () => {
    const id = await newSession();
    const refused = await Promise.resolve(
      rig.handlers.assign!({ $typeName: "rock.r.v1.AssignRequest", id, symbol: "a\0b", async: false, body: body("1") }, ctxOf(alice)),
    ).catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(Fault);
    expect(refused).to.deep.include({ kind: "invalid", message: "Symbol to assign cannot hold NUL" });
  });

  it("never runs a pending command that was deleted", async () => {
    const id = await newSession();
    await submit(id, "Sys.sleep(0.3)");
    await submit(id, "ran <- TRUE");
    await rig.handlers.deleteCommand!({ $typeName: "rock.r.v1.DeleteCommandRequest", id, cmdId: "2" }, ctxOf(alice));
    expect(await evalJson(id, "exists('ran')")).to.equal("false");
  });

  it("runs sync calls after the queued commands, in submission order", async () => {
    const id = await newSession();
    await submit(id, "Sys.sleep(0.2); order <- 'command'");
    expect(await evalJson(id, "order <- c(order, 'sync'); order")).to.equal('["command","sync"]');
  });

  it("interrupts a running evaluation and keeps the session and its variables", async () => {
    const id = await newSession();
    await evalJson(id, "kept <- 42");
    const running = evalJson(id, "repeat {}").catch((e: unknown) => e);
    await sleep(300);
    const res = await rig.handlers.interruptSession!({ $typeName: "rock.r.v1.InterruptSessionRequest", id }, ctxOf(alice));
    expect(res.interrupted).to.equal(true);
    expect(((await running) as Fault).kind).to.equal("invalid");
    expect(await evalJson(id, "kept")).to.equal("42");
    const idle = await rig.handlers.interruptSession!({ $typeName: "rock.r.v1.InterruptSessionRequest", id }, ctxOf(alice));
    expect(idle.interrupted).to.equal(false);
    expect(await evalJson(id, "kept + 1")).to.equal("43");
  });

  it("answers one way when the session ends under a call: running, waiting its turn, or arriving after", async () => {
    const session = rig.engine.session(await newSession());
    const running = session.eval(text("repeat {}"), "json").catch((e: unknown) => e);
    const waiting = session.eval(text("1"), "json").catch((e: unknown) => e);
    await until(() => session.busy);
    await session.end();
    const late = await session.eval(text("1"), "json").catch((e: unknown) => e);
    for (const outcome of [await running, await waiting, late]) {
      expect(outcome).to.be.instanceOf(Fault);
      expect(outcome).to.include({ kind: "internal", message: "R session has ended" });
    }
  });

  it("survives interrupts that land while R waits for or reads a request", async () => {
    const session = rig.engine.session(await newSession());
    await session.eval(text("kept <- 42"), "json");
    // The request is on its way when eval() returns, so each SIGINT reaches R in a blocking socket read
    // (waiting for the frame, or reading its 8 MB payload), not in an evaluation.
    const padding = `#${"x".repeat(8 * 1024 * 1024)}\n`;
    for (const script of ["kept + 1", `${padding}kept + 1`]) {
      for (let i = 0; i < 5; i++) {
        const answer = session.eval(text(script), "json").then(
          (value) => value.toString(),
          (error: Fault) => error.message,
        );
        expect(session.interrupt()).to.equal(true);
        // Either the evaluation was interrupted as asked, or it had nothing left to interrupt.
        expect(await answer).to.be.oneOf(["43", "Error: evaluation interrupted"]);
      }
    }
    expect(session.closed).to.equal(false);
    expect((await session.eval(text("kept"), "json")).toString()).to.equal("42");
  });

  it("interrupts Execute when its caller leaves", async () => {
    const id = await newSession();
    const controller = new AbortController();
    const stream = rig.handlers.execute!(
      { $typeName: "rock.r.v1.ExecuteRequest", id, accept: "", script: body("cat('go\\n'); repeat {}") },
      ctxOf(alice, controller.signal),
    );
    const events: string[] = [];
    const ended = await (async () => {
      for await (const e of stream) {
        events.push((e as { event: { case: string } }).event.case);
        controller.abort();
      }
    })().then(
      () => "completed",
      (e: unknown) => e,
    );
    expect(events).to.deep.equal(["output"]);
    expect(ended).to.equal(controller.signal.reason);
    expect(await evalJson(id, "'alive'")).to.equal('"alive"');
  });
});

describe("R session limits", function () {
  this.timeout(60_000);
  let rig: Rig | undefined;
  afterEach(async () => rig?.close());

  it("interrupts an evaluation past maxEvalSeconds", async () => {
    rig = await startRig({ maxEvalSeconds: 1 });
    const session = await rig.engine.createSession("alice");
    const started = Date.now();
    const error = await session.eval(text("repeat {}"), "json").catch((e: unknown) => e);
    expect((error as Fault).kind).to.equal("invalid");
    expect(Date.now() - started).to.be.within(900, 5000);
    expect((await session.eval(text("1"), "json")).toString()).to.equal("1");
  });

  it("closes idle sessions after the timeout", async () => {
    rig = await startRig({ sessionTimeoutMinutes: 0.01, sessionCheckSeconds: 0.2 });
    const idle = await rig.engine.createSession("alice");
    await sleep(400);
    const active = await rig.engine.createSession("alice");
    expect(rig.engine.sessions().map((s) => s.id)).to.include(idle.id);
    await sleep(600);
    await active.eval(text("1"), "json");
    await sleep(250);
    const ids = rig.engine.sessions().map((s) => s.id);
    expect(ids).to.not.include(idle.id);
    expect(ids).to.include(active.id);
    expect(existsSync(idle.dirs.home)).to.equal(false);
  });
});

/** Session processes of the rig's R server now (its forks: sessions and spares), from /proc. */
function forked(rig: Rig): ProcStat[] {
  const server = rig.engine.serverPid;
  return processes().filter((p) => p.pgrp === server && p.pid !== server && !p.zombie);
}

describe("spare sessions (r.spareSessions)", function () {
  this.timeout(60_000);
  let rig: Rig | undefined;
  afterEach(async () => rig?.close());

  const root = process.getuid?.() === 0;
  const pidOf = async (session: RSession): Promise<number> => Number((await session.eval(text("Sys.getpid()"), "json")).toString());
  /** Every session here runs one process: the other forks are the spares. */
  const spareCount = (): number => forked(rig!).length - rig!.engine.sessions().length;
  /** The number of spares reaches `n` and stays there (nothing forks past it). */
  const settles = async (n: number): Promise<void> => {
    // On a timeout, the count it stopped at.
    await until(() => spareCount() === n).catch(() => expect(spareCount(), "spares").to.equal(n));
    await sleep(300);
    expect(spareCount(), "spares").to.equal(n);
  };
  const refusal = (work: Promise<unknown>): Promise<Fault | undefined> =>
    work.then(
      () => undefined,
      (e: Fault) => e,
    );

  it("keeps r.spareSessions forked and confined ahead; a burst takes them and replacements are forked", async () => {
    rig = await startRig({ spareSessions: 3, maxSessionsPerUser: 0 });
    await settles(3);
    const { first, last } = rig.config.sessionUids;
    // Forked is not yet confined: a fork is root until it takes its uid.
    if (root) await until(() => forked(rig!).every((p) => p.uid >= first && p.uid <= last));
    const warm = forked(rig);

    const burst = await Promise.all([1, 2, 3].map(() => rig!.engine.createSession("alice")));
    const taken = await Promise.all(burst.map(pidOf));
    // Each caller got a spare of its own: none was forked on demand, none was handed out twice.
    expect([...taken].sort()).to.deep.equal(warm.map((p) => p.pid).sort());
    await settles(3);
    const refilled = forked(rig).filter((p) => !taken.includes(p.pid));
    expect(refilled).to.have.length(3);

    // Past the pool: sessions created back to back are still each their own process and uid.
    const more: RSession[] = [];
    for (let i = 0; i < 5; i++) more.push(await rig.engine.createSession("bob"));
    const all = [...burst, ...more];
    const pids = await Promise.all(all.map(pidOf));
    expect(new Set(pids).size).to.equal(all.length);
    if (root) {
      const uids = await Promise.all(all.map(async (s) => Number((await s.eval(text("unix::getuid()"), "json")).toString())));
      expect(new Set(uids).size).to.equal(all.length);
    }
    await settles(3);
    // A folder per session and per spare, nothing else.
    const sessionsDir = dirname(all[0]!.dirs.home);
    expect(readdirSync(sessionsDir)).to.have.length(all.length + 3);
    for (const s of all) expect(JSON.parse((await s.eval(text("list.files(tempdir())"), "json")).toString())).to.deep.equal([]);
  });

  it("never keeps spares past what r.maxSessions leaves", async () => {
    rig = await startRig({ spareSessions: 2, maxSessions: 3, maxSessionsPerUser: 0 });
    await settles(2);
    const a = await rig.engine.createSession("alice");
    await settles(2);
    await rig.engine.createSession("alice");
    await settles(1);
    await rig.engine.createSession("bob");
    await settles(0);
    expect((await refusal(rig.engine.createSession("bob")))?.kind).to.equal("limit");
    await a.end();
    await settles(1);
    await rig.engine.createSession("carol");
    await settles(0);
  });

  it("takes only free uids for spares, and a spare's uid serves the next caller", async function () {
    if (!root) this.skip();
    const first = 100_000 + Math.floor(Math.random() * 40_000) * 100;
    rig = await startRig({ spareSessions: 5, maxSessions: 0, maxSessionsPerUser: 0, sessionUids: { first, last: first + 2 } });
    await settles(3);
    const sessions = [];
    for (let i = 0; i < 3; i++) sessions.push(await rig.engine.createSession("alice"));
    await settles(0);
    const uids = await Promise.all(sessions.map(async (s) => Number((await s.eval(text("unix::getuid()"), "json")).toString())));
    expect([...uids].sort()).to.deep.equal([first, first + 1, first + 2]);
    expect((await refusal(rig.engine.createSession("bob")))?.message).to.match(/every session uid/);
    await sessions[0]!.end();
    // The uid is free again once its processes and folders are gone: a spare takes it, and the next
    // caller gets that spare.
    await settles(1);
    const next = await rig.engine.createSession("bob");
    expect(Number((await next.eval(text("unix::getuid()"), "json")).toString())).to.equal(uids[0]);
    await settles(0);
  });

  it("a caller whose spare failed forks itself and is told why, instead of taking spare after failing spare", async function () {
    if (!root) this.skip();
    // Every session fails to confine itself, in R after its fork, as when the service lacks SETUID:
    // slowly enough that each spare taken has its replacement forking already, which the next round
    // would take in turn, for ever. (The profile runs in the R server before any fork.)
    const dir = await mkdtemp(join(tmpdir(), "rock-failing-forks-"));
    const profile = join(dir, "profile.R");
    await writeFile(profile, 'assignInNamespace("setuid", function(uid) stop("refused by the test"), ns = "unix")\n', { mode: 0o644 });
    try {
      rig = await startRig({ spareSessions: 2, profile });
      const error = await refusal(rig.engine.createSession("alice"));
      expect(error?.message).to.not.match(/Too many R sessions/);
      const failed = (await readFile(join(rig.dataDir, "rserver.log"), "utf8")).split("refused by the test").length - 1;
      // Its spare, the spare's replacements and its own fork: a handful, not one per free uid.
      expect(failed).to.be.within(1, 6);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("checks with a spare and puts it back; a spare killed from outside is ended and replaced", async () => {
    const events: EngineEvent[] = [];
    rig = await startRig({ spareSessions: 2 }, { onEvent: (event) => events.push(event) });
    await settles(2);
    const before = forked(rig)
      .map((p) => p.pid)
      .sort();
    for (let i = 0; i < 5; i++) expect(await rig.engine.check()).to.equal(true);
    expect(await Promise.all([1, 2, 3].map(() => rig!.engine.check()))).to.deep.equal([true, true, true]);
    expect(
      forked(rig)
        .map((p) => p.pid)
        .sort(),
    ).to.deep.equal(before);

    process.kill(before[0]!, "SIGKILL");
    // Gone from /proc is not yet noticed by the engine, and a check before that would leave the dead
    // spare to be dropped after it, unreplaced until the next demand.
    await until(() => events.some((e) => e.kind === "spare-died"));
    await until(() => !forked(rig!).some((p) => p.pid === before[0]));
    expect(await rig.engine.check()).to.equal(true);
    await settles(2);
    expect(forked(rig).map((p) => p.pid)).to.include(before[1]);
  });

  it("with r.spareSessions 0 forks each session on demand and checks without leaving a process", async () => {
    rig = await startRig({ spareSessions: 0 });
    await settles(0);
    expect(await rig.engine.check()).to.equal(true);
    await settles(0);
    const session = await rig.engine.createSession("alice");
    expect((await session.eval(text("1 + 1"), "json")).toString()).to.equal("2");
    await settles(0);
  });
});
