/**
 * Sessions that outlive their process (README, Sessions that outlive their process), each figure beside
 * a reference of the same run:
 *
 * 1. Suspend and resume of a session holding 100 MiB and 1 GiB (BENCH_QUICK: 20 and 100 MiB): the time
 *    of `POST /r/session/{id}/_suspend` and of the first call after it (`_eval` of `1`, which resumes
 *    it), against R's own `saveRDS(x, f, compress = FALSE)` and `readRDS(f)` of the same object in a
 *    bare R process (Rscript) on the data folder's file system; beside them the same saveRDS/readRDS in
 *    the session's own process, and where the service's time goes (the save, the process's end, the
 *    rest; the fork and restore against the rest of the call).
 * 2. N sessions holding M MiB each (20 × 200 MiB; BENCH_QUICK 4 × 50), then idle: their memory as the
 *    kernel tells it before and after suspending them all at once, and the time that takes against
 *    R's saveRDS of the same bytes.
 * 3. Session create + delete and REST `_eval` of `1+1` on this code against the code before sessions
 *    could be suspended (commit BEFORE, checked out into a temporary git worktree), back to back in
 *    interleaved rounds.
 *
 * Servers run as production runs them (server-process.ts), isolated as root makes them by default (a
 * uid, a control group and a minimal root per session).
 */
import { execFile, spawn } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, mkdtemp, realpath, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { UidRange } from "../../src/config/config.js";
import { processes } from "../support/procfs.js";
import { basic } from "../support/server.js";
import { testSessionUids, uidsVariable } from "../support/uids.js";
import { onCleanup } from "./cleanup.js";
import { ensureH2load, h2load, type H2Request } from "./h2load.js";
import { HttpClient } from "./http-client.js";
import { RawHttpClient } from "./raw-http-client.js";
import { mib, ms, section, times, verdict, type Row, type Section } from "./report.js";
import { ROOT, startServerProcess, type ServerProcess } from "./server-process.js";
import { sampleInterleaved, summarize } from "./stats.js";

const run = promisify(execFile);

export interface SuspendBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

/** The code before issue 29 (sessions suspended and resumed): what creation and evals are compared with. */
const BEFORE = "b800019";
const USER = "admin";
const MIB = 1048576;
const JSON_EVAL = { "content-type": "application/x-rscript", accept: "application/json" };
/** The target of suspend and resume against R's own saveRDS and readRDS. */
const SUSPEND_TARGET = 1.5;
/** The target of creation and evals against the code before. */
const UNCHANGED_TARGET = 1.05;
/** A clock comparable with file times (ms since the epoch, sub-ms). */
const wall = (): number => performance.timeOrigin + performance.now();
const median = (xs: readonly number[]): number => summarize(xs).p50;
const sizeName = (m: number): string => (m >= 1024 ? `${m / 1024} GiB` : `${m} MiB`);

export async function runSuspendBench(o: SuspendBenchOptions): Promise<Section[]> {
  return [await suspendAndResume(o), await idleMemory(o), await unchanged(o)];
}

// ---- 1. suspend and resume against saveRDS and readRDS -------------------------------------------

async function suspendAndResume(o: SuspendBenchOptions): Promise<Section> {
  const s = section("Suspend and resume of a session, against R's own saveRDS / readRDS of the same object");
  const sizes = o.quick ? [20, 100] : [100, 1024];
  const rounds = 3;
  const log = new ServiceLog();
  o.log(`suspend: suspend and resume of sessions holding ${sizes.map(sizeName).join(" and ")}…`);
  // No spares: nothing is forked in the background while a save or a restore is timed. No
  // checkpoints: every suspend saves (R changed the session since the last save, every round).
  const server = await startServerProcess({
    rStart: true,
    env: { ROCK_R_SPARE_SESSIONS: "0", ROCK_R_CHECKPOINT_IDLE_SECONDS: "0" },
    onLine: log.onLine,
  });
  const http = new HttpClient(server.port, USER);
  try {
    // The fixed costs: a session holding nothing, and a call on a session that has its process.
    const empty = await createSession(http);
    const plain: number[] = [];
    const fixed = { suspend: [] as number[], resume: [] as number[] };
    for (let r = 0; r < rounds + 1; r++) {
      const t = performance.now();
      await evalOk(http, empty, "1");
      plain.push(performance.now() - t);
      const one = await suspendOnce(http, server, empty, undefined);
      const first = await firstCall(http, empty);
      // The first round warms the file system's and R's caches up: not counted.
      if (r === 0) continue;
      fixed.suspend.push(one.total);
      fixed.resume.push(first);
    }
    await http.ok("DELETE", `/r/session/${empty}`);
    s.rows.push(
      { figure: "suspend, empty session (what any suspend costs)", value: ms(median(fixed.suspend)) },
      {
        figure: "first call after it (resume + _eval of 1)",
        value: ms(median(fixed.resume)),
        reference: `_eval of 1, session running: ${ms(median(plain))}`,
      },
    );

    for (const size of sizes) {
      const doubles = (size * MIB) / 8;
      o.log(`suspend: ${sizeName(size)}, ${rounds} rounds…`);
      const id = await createSession(http);
      await evalOk(http, id, `x <- runif(${doubles}); length(x)`);
      const floorFile = join(server.dataDir, "floor.rds");
      const removeFloor = onCleanup(() => rm(floorFile, { force: true }));
      const f = { save: [] as number[], read: [] as number[], bytes: 0 };
      const our = {
        suspend: [] as number[],
        resume: [] as number[],
        inSave: [] as number[],
        inRead: [] as number[],
        saved: [] as number[],
        ended: [] as number[],
        rest: [] as number[],
        serverSuspend: [] as number[],
        serverResume: [] as number[],
        bytes: 0,
      };
      const floor = async () => {
        const { save, read, bytes } = await floorRound(doubles, floorFile);
        f.save.push(save);
        f.read.push(read);
        f.bytes = bytes;
      };
      const ours = async () => {
        // The session's own R, in its process (its uid, group and mount namespace), the same calls.
        const [inSave, inRead, pid] = await evalJson<[number, number, number]>(http, id, IN_SESSION);
        our.inSave.push(inSave * 1000);
        our.inRead.push(inRead * 1000);
        const one = await suspendOnce(http, server, id, pid);
        our.suspend.push(one.total);
        our.saved.push(one.saved);
        if (one.ended !== undefined) {
          our.ended.push(one.ended - one.saved);
          our.rest.push(one.total - one.ended);
        }
        our.bytes = one.bytes;
        our.resume.push(await firstCall(http, id));
        const [suspended, resumed] = [await log.next("R session suspended", id), await log.next("R session resumed", id)];
        if (suspended !== undefined) our.serverSuspend.push(suspended);
        if (resumed !== undefined) our.serverResume.push(resumed);
      };
      try {
        for (let r = 0; r < rounds; r++) {
          for (const step of r % 2 === 0 ? [floor, ours] : [ours, floor]) await step();
        }
      } finally {
        await removeFloor();
      }
      await http.ok("DELETE", `/r/session/${id}`);
      const [suspend, save, resume, read] = [median(our.suspend), median(f.save), median(our.resume), median(f.read)];
      const rest = our.rest.length > 0 ? ms(median(our.rest)) : "?";
      const ended = our.ended.length > 0 ? ms(median(our.ended)) : "?";
      s.rows.push(
        {
          figure: `suspend, session holding ${sizeName(size)} (POST _suspend → 204)`,
          value: ms(suspend),
          reference: `saveRDS ${ms(save)} (Rscript)`,
          ratio: times(suspend / save),
          target: `≤ ${SUSPEND_TARGET}×`,
          verdict: verdict(suspend <= SUSPEND_TARGET * save),
        },
        {
          figure: "… its time: the save (to the state's last write) / on to the process's end / the rest",
          value: `${ms(median(our.saved))} / ${ended} / ${rest}`,
          reference: `saveRDS in the session's R ${ms(median(our.inSave))}`,
          ratio: times(median(our.saved) / median(our.inSave)),
        },
        {
          figure: `first call after it (resume + _eval of 1), ${sizeName(size)}`,
          value: ms(resume),
          reference: `readRDS ${ms(read)} (Rscript)`,
          ratio: times(resume / read),
          target: `≤ ${SUSPEND_TARGET}×`,
          verdict: verdict(resume <= SUSPEND_TARGET * read),
        },
        {
          figure: "… its time: the resume (fork, folders to the uid, restore; service log) / the rest",
          value: our.serverResume.length > 0 ? `${ms(median(our.serverResume))} / ${ms(resume - median(our.serverResume))}` : "?",
          reference: `readRDS in the session's R ${ms(median(our.inRead))}`,
          ratio: our.serverResume.length > 0 ? times(median(our.serverResume) / median(our.inRead)) : "",
        },
        {
          figure: `state file, ${sizeName(size)}`,
          value: mib(our.bytes),
          reference: `saveRDS's file ${mib(f.bytes)}`,
          ratio: times(our.bytes / f.bytes),
        },
      );
      if (our.serverSuspend.length > 0)
        s.notes.push(
          `${sizeName(size)}: the service log's ms of "R session suspended": ${our.serverSuspend.join(", ")}; of "R session resumed": ${our.serverResume.join(", ")}.`,
        );
    }
  } finally {
    http.close();
    await server.stop();
  }
  s.notes.push(
    `${rounds} rounds per size, medians; in each the floor and the server in turn (each first every other round). Floor: x <- runif(n), then saveRDS(x, f, compress = FALSE) timed in one Rscript --vanilla and readRDS(f) timed in a second (a new process, as a resume is), f in the server's data folder (same file system as the states) and written over the next round as a session's state is by its next suspend. Dirty pages are flushed (sync) before each timed save and suspend. The session's R: the same two calls timed in the session's process just before its suspend. Server: r.spareSessions 0 (nothing forked in the background), r.checkpointIdleSeconds 0 (every suspend saves), isolated sessions (uid, control group, minimal root).`,
    `Where the suspend's time goes, read from outside: "the save" ends at the state file's modification time (the .tmp file's last write, renamed), "on to the process's end" until /proc shows the session's R process gone or a zombie (polled every 2 ms: the state renamed over the last one, R's answer, the record written, SIGKILL, the kernel's teardown), "the rest" until the 204 (reap, its control group removed, its folder given back to root, the uid freed, the answer). File times are the kernel's coarse clock (a few ms).`,
  );
  return s;
}

/**
 * R's saveRDS and readRDS of the same object in the session's own process, just before its suspend:
 * seconds each, and the process's pid; what was read is freed (a full collection), so that the process
 * ends holding what it held before.
 */
const IN_SESSION = `local({
  f <- file.path(tempdir(), "bench-floor.rds")
  t <- Sys.time(); saveRDS(x, f, compress = FALSE); a <- as.numeric(difftime(Sys.time(), t, units = "secs"))
  t <- Sys.time(); y <- readRDS(f); b <- as.numeric(difftime(Sys.time(), t, units = "secs"))
  unlink(f); rm(y); invisible(gc())
  c(a, b, Sys.getpid())
})`;

interface Suspended {
  /** POST _suspend → 204, ms. */
  readonly total: number;
  /** From the request to the state file's last write, ms. */
  readonly saved: number;
  /** From the request to the session's process gone (or a zombie), ms; undefined when not watched. */
  readonly ended: number | undefined;
  readonly bytes: number;
}

async function suspendOnce(http: HttpClient, server: ServerProcess, id: string, pid: number | undefined): Promise<Suspended> {
  const state = join(server.dataDir, "sessions", id, "session.state");
  let endedAt: number | undefined;
  const watch =
    pid === undefined
      ? undefined
      : setInterval(() => {
          if (endedAt === undefined && hasEnded(pid)) endedAt = wall();
        }, 2);
  await run("sync");
  const t = wall();
  try {
    await http.ok("POST", `/r/session/${id}/_suspend`, {}, 204);
  } finally {
    clearInterval(watch);
  }
  const total = wall() - t;
  const file = await stat(state);
  return { total, saved: file.mtimeMs - t, ended: endedAt === undefined ? undefined : endedAt - t, bytes: file.size };
}

/** The first call after a suspend, which resumes the session: ms. */
async function firstCall(http: HttpClient, id: string): Promise<number> {
  const t = performance.now();
  await evalOk(http, id, "1");
  return performance.now() - t;
}

/**
 * R's own saveRDS (timed in one Rscript) and readRDS (timed in a second) of runif(`doubles`) into
 * `file`, which is kept: the next round writes over it, as a session's next suspend replaces its
 * state. The dirty pages of earlier writes are flushed first (sync), as before a suspend.
 */
async function floorRound(doubles: number, file: string): Promise<{ save: number; read: number; bytes: number }> {
  const f = JSON.stringify(file);
  const save = await rSeconds(`x <- runif(${doubles}); system("sync"); t <- Sys.time(); saveRDS(x, ${f}, compress = FALSE)`);
  const bytes = (await stat(file)).size;
  const read = await rSeconds(`t <- Sys.time(); x <- readRDS(${f})`);
  return { save, read, bytes };
}

/** Runs `code` in a bare R (Rscript --vanilla), which sets `t`: the ms from `t` to its end. */
async function rSeconds(code: string): Promise<number> {
  const { stdout } = await run(
    "Rscript",
    ["--vanilla", "-e", `${code}; cat(format(as.numeric(difftime(Sys.time(), t, units = "secs")), digits = 15), "\\n")`],
    { maxBuffer: 1 << 20 },
  );
  const seconds = Number(stdout.trim().split(/\s+/).pop());
  if (!Number.isFinite(seconds)) throw new Error(`Rscript printed no time: ${stdout}`);
  return seconds * 1000;
}

// ---- 2. idle sessions' memory -------------------------------------------------------------------

async function idleMemory(o: SuspendBenchOptions): Promise<Section> {
  const s = section("Idle sessions' memory before and after suspending them all at once");
  const each = o.quick ? 50 : 200;
  let n = o.quick ? 4 : 20;
  // The sessions' objects, their states in the page cache, the floor's files, and room for the rest.
  const needed = (k: number) => k * each * MIB * 2 + 2 * 1024 * MIB;
  const available = memAvailable();
  if (available < needed(n)) {
    const fits = Math.max(2, Math.floor((available - 2 * 1024 * MIB) / (2 * each * MIB)));
    s.notes.push(
      `${fits} sessions instead of ${n}: MemAvailable ${mib(available)} is short of the ${mib(needed(n))} that ${n} sessions of ${each} MiB need here (their objects, their states in the page cache, 2 GiB for the rest).`,
    );
    n = fits;
  }
  o.log(`suspend: ${n} sessions holding ${each} MiB each, then all suspended at once…`);
  const uids = testSessionUids();
  const server = await startServerProcess({
    rStart: true,
    env: {
      ROCK_R_SESSION_UIDS: uidsVariable(uids),
      // Only the sessions' own processes: no spare is forked, and none is counted.
      ROCK_R_SPARE_SESSIONS: "0",
      ROCK_R_CHECKPOINT_IDLE_SECONDS: "0",
      ROCK_R_MAX_SESSIONS_PER_USER: String(n),
    },
  });
  const http = new HttpClient(server.port, USER, n);
  const floorDir = join(server.dataDir, "floor");
  const removeFloor = onCleanup(() => rm(floorDir, { recursive: true, force: true }));
  try {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const id = await createSession(http);
      ids.push(id);
      await evalOk(http, id, `x <- runif(${(each * MIB) / 8}); length(x)`);
    }
    await new Promise((r) => setTimeout(r, 1000));
    await run("sync");
    const before = { own: sessionMemory(uids), groups: await groupsMemory(http), available: memAvailable() };
    const each204: number[] = [];
    const t = performance.now();
    await Promise.all(
      ids.map(async (id) => {
        await http.ok("POST", `/r/session/${id}/_suspend`, {}, 204);
        each204.push(performance.now() - t);
      }),
    );
    const all = performance.now() - t;
    const after = { own: sessionMemory(uids), groups: await groupsMemory(http), available: memAvailable() };
    const states = ids.reduce((sum, id) => sum + statSync(join(server.dataDir, "sessions", id, "session.state")).size, 0);
    // The floors: the same bytes through R's saveRDS, one object after the other in one process, and
    // from n bare R processes at once (the sessions' concurrency without the service).
    o.log(`suspend: the same ${n} × ${each} MiB through R's saveRDS, in one R, then in ${n} at once…`);
    await mkdir(floorDir);
    const floor = await rSeconds(
      `x <- runif(${(each * MIB) / 8}); system("sync"); t <- Sys.time(); for (i in seq_len(${n})) saveRDS(x, file.path(${JSON.stringify(floorDir)}, paste0(i, ".rds")), compress = FALSE)`,
    );
    await rm(floorDir, { recursive: true, force: true });
    await mkdir(floorDir);
    const together = await parallelSaves(n, (each * MIB) / 8, floorDir);
    await removeFloor();
    for (const id of ids) await http.ok("DELETE", `/r/session/${id}`);
    const ratioOf = (a: number, b: number) => (b > 0 ? times(a / b) : "");
    s.rows.push(
      {
        figure: `${n} sessions × ${each} MiB: the session processes' memory (sum of PSS, /proc) after suspending all`,
        value: `${mib(after.own.pss)} (${after.own.processes} processes)`,
        reference: `before ${mib(before.own.pss)} (${before.own.processes} processes)`,
        ratio: ratioOf(after.own.pss, before.own.pss),
        target: "none left",
        verdict: verdict(after.own.processes === 0),
      },
      {
        figure: "… sum of RSS",
        value: mib(after.own.rss),
        reference: `before ${mib(before.own.rss)}`,
        ratio: ratioOf(after.own.rss, before.own.rss),
      },
      {
        figure: "… the sessions' control groups (GET /rserver sessions.memoryBytes)",
        value: after.groups === undefined ? "no quotas" : mib(after.groups),
        reference: before.groups === undefined ? "" : `before ${mib(before.groups)}`,
        ratio: after.groups !== undefined && before.groups ? ratioOf(after.groups, before.groups) : "",
      },
      {
        figure: "… the machine's MemAvailable (/proc/meminfo)",
        value: mib(after.available),
        reference: `before ${mib(before.available)}`,
        ratio: `${after.available >= before.available ? "+" : ""}${mib(after.available - before.available)}`,
      },
      {
        figure: `suspend all ${n} at once (${n} POST _suspend together, the last 204)`,
        value: ms(all),
        reference: `saveRDS of the same ${n} × ${each} MiB, one after the other: ${ms(floor)}`,
        ratio: times(all / floor),
      },
      {
        figure: `… against ${n} bare R processes (Rscript) saving the same at once`,
        value: ms(all),
        reference: ms(together),
        ratio: times(all / together),
      },
      {
        figure: "… the states on disk",
        value: mib(states),
        reference: `the objects ${mib(n * each * MIB)}`,
        ratio: times(states / (n * each * MIB)),
      },
    );
    s.notes.push(
      `Each session: x <- runif(${(each * MIB) / 8}) (${each} MiB), then 1 s idle; r.spareSessions 0 (only the sessions' processes), r.checkpointIdleSeconds 0 (every suspend saves), isolated sessions with quotas where the host has them. The suspends' answers came after ${ms(summarize(each204).min)} (first), ${ms(median(each204))} (median), ${ms(all)} (last).`,
      "The control groups' figure (cgroup v1: memory.usage_in_bytes of the sessions' group) counts the page cache charged to them: the states the sessions wrote stay charged to the sessions' group once the session's own group is gone, reclaimable, until the kernel needs the memory.",
    );
  } finally {
    http.close();
    await removeFloor();
    await server.stop();
  }
  return s;
}

/**
 * `n` bare R processes (Rscript), each holding runif(`doubles`), all told at once to saveRDS it into
 * `dir`: the ms from that moment to the end of the last save.
 */
async function parallelSaves(n: number, doubles: number, dir: string): Promise<number> {
  const go = join(dir, "go");
  const code = [
    `x <- runif(${doubles})`,
    `cat("ready\\n")`,
    `while (!file.exists(${JSON.stringify(go)})) Sys.sleep(0.005)`,
    `saveRDS(x, file.path(${JSON.stringify(dir)}, paste0(Sys.getpid(), ".rds")), compress = FALSE)`,
    `cat(format(as.numeric(Sys.time()) * 1000, digits = 16), "\\n")`,
  ].join("; ");
  const children = Array.from({ length: n }, () => spawn("Rscript", ["--vanilla", "-e", code], { stdio: ["ignore", "pipe", "ignore"] }));
  const stop = onCleanup(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  try {
    const runs = children.map((child) => {
      let out = "";
      child.stdout.setEncoding("utf8");
      const ready = new Promise<void>((resolve, reject) => {
        child.stdout.on("data", (text: string) => {
          out += text;
          if (out.includes("ready\n")) resolve();
        });
        child.once("exit", () => reject(new Error(`Rscript ended before it was ready: ${out}`)));
      });
      const ended = new Promise<number>((resolve, reject) =>
        child.once("exit", (code) => {
          const at = Number(out.trim().split(/\s+/).pop());
          if (code === 0 && Number.isFinite(at)) resolve(at);
          else reject(new Error(`Rscript ended with ${code}: ${out}`));
        }),
      );
      // Either may be left unawaited when the other rejects.
      ready.catch(() => undefined);
      ended.catch(() => undefined);
      return { ready, ended };
    });
    await Promise.all(runs.map((r) => r.ready));
    await run("sync");
    const t = wall();
    await writeFile(go, "");
    const ends = await Promise.all(runs.map((r) => r.ended));
    return Math.max(...ends) - t;
  } finally {
    await stop();
  }
}

/** The processes of the uid block `uids` (the sessions'), and their memory from /proc. */
function sessionMemory(uids: UidRange): { processes: number; rss: number; pss: number } {
  let [count, rss, pss] = [0, 0, 0];
  for (const p of processes()) {
    if (p.zombie || p.uid < uids.first || p.uid > uids.last) continue;
    try {
      const rollup = readFileSync(`/proc/${p.pid}/smaps_rollup`, "utf8");
      rss += kb(rollup, "Rss");
      pss += kb(rollup, "Pss");
      count++;
    } catch {
      // ended meanwhile
    }
  }
  return { processes: count, rss, pss };
}

function kb(text: string, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text);
  return m ? Number(m[1]) * 1024 : 0;
}

/** The sessions' control groups' memory as the service reads it; undefined without quotas. */
async function groupsMemory(http: HttpClient): Promise<number | undefined> {
  const status = JSON.parse((await http.ok("GET", "/rserver")).body.toString("utf8")) as { sessions?: { memoryBytes?: number | string } };
  const bytes = status.sessions?.memoryBytes;
  return bytes === undefined ? undefined : Number(bytes);
}

function memAvailable(): number {
  const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"));
  return m ? Number(m[1]) * 1024 : 0;
}

/** Whether process `pid` has ended (gone, or a zombie not reaped yet). */
function hasEnded(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

// ---- 3. creation and evals against the code before ----------------------------------------------

async function unchanged(o: SuspendBenchOptions): Promise<Section> {
  const s = section(`Session creation and evals: this code against the code before suspended sessions (${BEFORE}), same run`);
  o.log(`suspend: checking out ${BEFORE} into a temporary worktree…`);
  const before = await checkOut(BEFORE);
  try {
    const cycles = o.quick ? 40 : 200;
    for (const spares of ["8", "0"]) {
      o.log(`suspend: create + delete, this code and ${BEFORE}, r.spareSessions ${spares}…`);
      const servers: ServerProcess[] = [];
      try {
        const env = { ROCK_R_SPARE_SESSIONS: spares };
        servers.push(await startServerProcess({ rStart: true, env, typescript: true }));
        servers.push(await startServerProcess({ rStart: true, env, root: before.root }));
        const [now, old] = servers.map((server) => new HttpClient(server.port, USER)) as [HttpClient, HttpClient];
        const cycle = (http: HttpClient) => async () => {
          const t = performance.now();
          const id = await createSession(http);
          await http.ok("DELETE", `/r/session/${id}`);
          return performance.now() - t;
        };
        const samples = { now: [] as number[], old: [] as number[] };
        for (let i = 0; i < 5; i++) {
          await cycle(now)();
          await cycle(old)();
        }
        const rounds = 10;
        for (let r = 0; r < rounds; r++) {
          const order: Array<"now" | "old"> = r % 2 === 0 ? ["now", "old"] : ["old", "now"];
          for (const side of order) {
            // Spares fork again between blocks, so that each block starts as the other did.
            if (spares !== "0") await new Promise((resolve) => setTimeout(resolve, 500));
            const http = side === "now" ? now : old;
            for (let i = 0; i < cycles / rounds; i++) samples[side].push(await cycle(http)());
          }
        }
        const [a, b] = [median(samples.now), median(samples.old)];
        s.rows.push({
          figure: `session create + delete p50, r.spareSessions ${spares}${spares === "0" ? " (forked on the call)" : " (the default)"}`,
          value: ms(a),
          reference: `${BEFORE} ${ms(b)}`,
          ratio: times(a / b),
          target: `≤ ${UNCHANGED_TARGET}×`,
          verdict: verdict(a / b <= UNCHANGED_TARGET),
        });
        if (spares !== "0") s.rows.push(...(await evals(o, servers[0]!, servers[1]!, now, old)));
        now.close();
        old.close();
      } finally {
        for (const server of servers) await server.stop();
      }
    }
    s.notes.push(
      `Two servers as production runs them, one from this checkout and one from ${BEFORE} (a git worktree under /tmp, node_modules linked, r-library copied), the same environment, both running at once; create + delete: ${cycles} cycles per server in 10 rounds (each server first every other round; with spares, 0.5 s before each block for them to be forked again), node:http keep-alive client; evals: one session per server.`,
    );
  } finally {
    await before.remove();
  }
  return s;
}

/** REST `_eval` of `1+1` on the two servers in turn: the minimal client's p50 and h2load's mean. */
async function evals(o: SuspendBenchOptions, now: ServerProcess, old: ServerProcess, a: HttpClient, b: HttpClient): Promise<Row[]> {
  o.log(`suspend: eval 1+1, this code and ${BEFORE}…`);
  const rows: Row[] = [];
  const [idNow, idOld] = [await createSession(a), await createSession(b)];
  const clients = [await RawHttpClient.connect(now.port, USER), await RawHttpClient.connect(old.port, USER)] as const;
  try {
    const evalOf = (client: RawHttpClient, id: string) => async () => {
      const answer = await client.request(
        "POST",
        `/r/session/${id}/_eval`,
        { "Content-Type": JSON_EVAL["content-type"], Accept: "application/json" },
        "1+1",
      );
      if (answer.status !== 200 || answer.body.toString("utf8") !== "2")
        throw new Error(`eval 1+1 answered ${answer.status}: ${answer.body.toString("utf8", 0, 200)}`);
    };
    const e = await sampleInterleaved({ now: evalOf(clients[0], idNow), old: evalOf(clients[1], idOld) }, o.quick ? 500 : 3000, 200);
    rows.push({
      figure: "REST _eval of 1+1 p50 (minimal HTTP/1.1 client, kept alive)",
      value: ms(e.now.p50),
      reference: `${BEFORE} ${ms(e.old.p50)}`,
      ratio: times(e.now.p50 / e.old.p50),
      target: `≤ ${UNCHANGED_TARGET}×`,
      verdict: verdict(e.now.p50 / e.old.p50 <= UNCHANGED_TARGET),
    });
  } finally {
    for (const client of clients) client.close();
  }
  const missing = await ensureH2load();
  if (missing) {
    rows.push({ figure: "REST _eval of 1+1, h2load", value: `skipped: ${missing}` });
    return rows;
  }
  const dir = await mkdtemp(join(tmpdir(), "rock-bench-suspend-"));
  const removeDir = onCleanup(() => rm(dir, { recursive: true, force: true }));
  try {
    const body = join(dir, "1+1");
    await writeFile(body, "1+1");
    const request = (server: ServerProcess, id: string): H2Request => ({
      url: `http://127.0.0.1:${server.port}/r/session/${id}/_eval`,
      headers: { authorization: basic(USER), ...JSON_EVAL },
      body,
      h1: true,
    });
    const calls = { now: request(now, idNow), old: request(old, idOld) };
    const n = o.quick ? 1000 : 4000;
    const rounds = o.quick ? 2 : 6;
    for (const q of Object.values(calls)) await h2load(q, 500);
    const means = { now: [] as number[], old: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      for (const side of r % 2 === 0 ? (["now", "old"] as const) : (["old", "now"] as const))
        means[side].push((await h2load(calls[side], n)).meanUs);
    }
    const [x, y] = [median(means.now), median(means.old)];
    rows.push({
      figure: `REST _eval of 1+1, h2load (C, HTTP/1.1 kept alive), mean latency, median of ${rounds} rounds`,
      value: ms(x / 1000),
      reference: `${BEFORE} ${ms(y / 1000)}`,
      ratio: times(x / y),
      target: `≤ ${UNCHANGED_TARGET}×`,
      verdict: verdict(x / y <= UNCHANGED_TARGET),
    });
  } finally {
    await removeDir();
  }
  return rows;
}

/**
 * `commit` checked out into a git worktree under the temporary folder, with this checkout's
 * node_modules linked and its r-library copied; `remove` (also run by the bench's cleanup on an error
 * or an interrupt) takes the worktree away.
 */
async function checkOut(commit: string): Promise<{ readonly root: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), `rock-bench-${commit}-`));
  const root = join(dir, "rock");
  const remove = onCleanup(async () => {
    await run("git", ["-C", ROOT, "worktree", "remove", "--force", root]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });
  try {
    await run("git", ["-C", ROOT, "worktree", "add", "--detach", root, commit]);
    await symlink(await realpath(join(ROOT, "node_modules")), join(root, "node_modules"));
    if (readdirSync(ROOT).includes("r-library")) await run("cp", ["-a", join(ROOT, "r-library"), join(root, "r-library")]);
  } catch (e) {
    await remove();
    throw e;
  }
  return { root, remove };
}

// ---- shared ---------------------------------------------------------------------------------------

async function createSession(http: HttpClient): Promise<string> {
  return (JSON.parse((await http.ok("POST", "/r/sessions", {}, 201)).body.toString("utf8")) as { id: string }).id;
}

async function evalOk(http: HttpClient, id: string, code: string): Promise<Buffer> {
  return (await http.ok("POST", `/r/session/${id}/_eval`, { headers: JSON_EVAL, body: code }, 200)).body;
}

async function evalJson<T>(http: HttpClient, id: string, code: string): Promise<T> {
  return JSON.parse((await evalOk(http, id, code)).toString("utf8")) as T;
}

/** The `ms` of the service log's lines about sessions ("R session suspended", "R session resumed"), in order. */
class ServiceLog {
  private readonly seen = new Map<string, number[]>();
  private readonly waiting = new Map<string, (ms: number) => void>();

  readonly onLine = (line: string): void => {
    if (!line.startsWith("{")) return;
    let fields: { msg?: unknown; session?: unknown; ms?: unknown };
    try {
      fields = JSON.parse(line) as typeof fields;
    } catch {
      return;
    }
    if (typeof fields.msg !== "string" || typeof fields.session !== "string" || typeof fields.ms !== "number") return;
    const key = `${fields.msg}\n${fields.session}`;
    const waiter = this.waiting.get(key);
    if (waiter) {
      this.waiting.delete(key);
      waiter(fields.ms);
    } else this.seen.set(key, [...(this.seen.get(key) ?? []), fields.ms]);
  };

  /** The next line `msg` about session `id` not taken yet: its `ms`; undefined when none came within 3 s. */
  next(msg: string, id: string): Promise<number | undefined> {
    const key = `${msg}\n${id}`;
    const seen = this.seen.get(key);
    if (seen && seen.length > 0) return Promise.resolve(seen.shift());
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiting.delete(key);
        resolve(undefined);
      }, 3000);
      this.waiting.set(key, (value) => {
        clearTimeout(timer);
        resolve(value);
      });
    });
  }
}
