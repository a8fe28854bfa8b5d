/**
 * One range of session uids, one server: real server processes on one host (their lock folder this
 * run's, test/support/uids.ts). A second server given a range another runs on refuses to start with one
 * line, touching nothing of the first's; servers on different ranges run side by side; a range whose
 * server was killed is taken by the next start, which ends what the dead one left.
 */
import { expect } from "chai";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { liveProcessesByUid } from "../../src/r/confine/processes.js";
import { rest } from "../support/clients.js";
import { processes } from "../support/procfs.js";
import { spawnRock, untilAnswers, type RockProcess } from "../support/rock-process.js";
import { testLockDir } from "../support/uids.js";
import { until } from "./support.js";

const user = { user: "user", password: "user" };
const RSCRIPT = { "content-type": "application/x-rscript" };

/** The refusal a server given `uids` prints when the server of `pid` holds them. */
const refusal = (uids: string, pid: number): string =>
  `The session uids ${uids} (r.sessionUids, ROCK_R_SESSION_UIDS) are held by another rock-ts server, pid ${pid}: give this one another range`;

describe("one range of session uids, one server (as root)", function () {
  this.timeout(120_000);
  before(function () {
    if (process.getuid?.() !== 0) {
      console.log("      skipped: not root (only a server whose sessions get uids of their own locks its range)");
      this.skip();
    }
  });

  const started: RockProcess[] = [];
  // The last started first: a server started on a killed one's data folder ends before the folder goes.
  afterEach(async () => {
    for (const server of started.splice(0).reverse()) await server.kill();
  });

  /** A server process with R started, serving; `env` may give it a range. */
  async function serving(env: Record<string, string> = {}): Promise<RockProcess> {
    const server = await spawnRock({ ROCK_R_START: "true", ROCK_R_SPARE_SESSIONS: "1", ...env });
    started.push(server);
    try {
      await untilAnswers(server.url, "/_check", 200);
    } catch (e) {
      throw new Error(`${(e as Error).message}; the server said: ${server.log().slice(-2000)}`);
    }
    return server;
  }

  async function newSession(server: RockProcess): Promise<string> {
    const created = await rest(server.url, "POST", "/r/sessions", user);
    expect(created.status, created.text).to.equal(201);
    return created.json<{ id: string }>().id;
  }

  async function evaluate(server: RockProcess, id: string, code: string): Promise<string> {
    const answer = await rest(server.url, "POST", `/r/session/${id}/_eval`, { ...user, headers: RSCRIPT, body: code });
    expect(answer.status, answer.text).to.equal(200);
    return answer.text;
  }

  const inRange = (uids: string): ((uid: number) => boolean) => {
    const [first, last] = uids.split("-").map(Number) as [number, number];
    return (uid) => uid >= first && uid <= last;
  };

  /** Every live process of the range's uids, sorted. */
  const processesOf = async (uids: string): Promise<number[]> => [...(await liveProcessesByUid(inRange(uids))).values()].flat().sort();

  it("refuses a second server on the range with one line naming it, the first's pid and r.sessionUids; the first's sessions live on", async () => {
    const first = await serving();
    const id = await newSession(first);
    const sessionPid = Number(await evaluate(first, id, "Sys.getpid()"));
    // The session and the spare that replaced the one it took: two uids with a process and a folder each.
    const sessionsDir = join(first.dataDir, "sessions");
    await until(async () => (await liveProcessesByUid(inRange(first.uids))).size === 2 && readdirSync(sessionsDir).length === 2);
    const before = { processes: await processesOf(first.uids), folders: readdirSync(sessionsDir).sort() };
    const group = readFileSync(`/proc/${sessionPid}/cgroup`, "utf8");
    const lock = join(testLockDir(), `uids-${first.uids}.lock`);
    expect(readFileSync(lock, "utf8")).to.equal(`${first.pid}\n`);

    const second = await spawnRock({ ROCK_R_START: "true", ROCK_R_SESSION_UIDS: first.uids });
    started.push(second);
    const exit = await second.exited;
    expect(exit.code, second.log()).to.equal(1);
    const errors = second
      .log()
      .split("\n")
      .filter((line) => line.includes('"level":"error"'));
    expect(errors, second.log()).to.have.length(1);
    expect(JSON.parse(errors[0]!)).to.include({ msg: "could not start", error: refusal(first.uids, first.pid) });

    // Nothing of the first's was touched: its processes, their control group, its folders, its lock.
    expect(await processesOf(first.uids)).to.deep.equal(before.processes);
    expect(readdirSync(sessionsDir).sort()).to.deep.equal(before.folders);
    expect(readFileSync(`/proc/${sessionPid}/cgroup`, "utf8")).to.equal(group);
    expect(readFileSync(lock, "utf8")).to.equal(`${first.pid}\n`);
    expect(await evaluate(first, id, "Sys.getpid()")).to.equal(String(sessionPid));
    expect(await evaluate(first, id, "21 * 2")).to.equal("42");
  });

  it("runs servers on different ranges side by side, each with a working session", async () => {
    const a = await serving();
    const inA = await newSession(a);
    const b = await serving();
    expect(b.uids).to.not.equal(a.uids);
    const inB = await newSession(b);
    expect(await evaluate(a, inA, "1 + 1")).to.equal("2");
    expect(await evaluate(b, inB, "2 + 2")).to.equal("4");
    const uidA = Number(await evaluate(a, inA, "unix::getuid()"));
    const uidB = Number(await evaluate(b, inB, "unix::getuid()"));
    expect(inRange(a.uids)(uidA), `${uidA} in ${a.uids}`).to.equal(true);
    expect(inRange(b.uids)(uidB), `${uidB} in ${b.uids}`).to.equal(true);
  });

  it("gives the range of a killed server to the next start, which ends what the dead one left", async () => {
    const first = await serving();
    const id = await newSession(first);
    // A process of the session's uid that outlives the session and the server.
    await evaluate(first, id, "system('setsid sleep 300 > /dev/null 2>&1 < /dev/null &'); TRUE");
    const [uid] = [...(await liveProcessesByUid(inRange(first.uids))).entries()].find(([, pids]) => pids.length > 1) ?? [];
    expect(uid, "the session's uid, with its sleep").to.be.a("number");
    const folder = join(first.dataDir, "sessions", id);
    // Its R server is ended by the test's end, whatever becomes of it.
    expect(first.noteRServer(), "the R server's process group").to.be.a("number");
    process.kill(first.pid, "SIGKILL");
    await first.exited;
    expect(existsSync(folder), "the dead server's session folder").to.equal(true);
    const left = (await liveProcessesByUid((u) => u === uid)).get(uid!) ?? [];
    expect(left, "what the dead server's session left").to.not.be.empty;

    const next = await serving({ ROCK_R_SESSION_UIDS: first.uids, ROCK_DATA_DIR: first.dataDir });
    expect(next.log()).to.not.include("could not start");
    expect(readFileSync(join(testLockDir(), `uids-${first.uids}.lock`), "utf8")).to.equal(`${next.pid}\n`);
    // Reaped at its R server's first start, as a crashed run's leftovers are.
    // (The next server's own sessions may get the same uid: the dead one's processes are looked for.)
    await until(() => !processes().some((p) => left.includes(p.pid) && !p.zombie));
    expect(existsSync(folder), "the dead server's session folder").to.equal(false);
    const mine = await newSession(next);
    expect(await evaluate(next, mine, "1 + 1")).to.equal("2");
  });
});
