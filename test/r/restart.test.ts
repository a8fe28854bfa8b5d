import { expect } from "chai";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execa, type ResultPromise } from "execa";
import { defaults } from "../../src/config/load.js";
import { rest } from "../support/clients.js";
import { spawnRock, untilAnswers, type RockProcess } from "../support/rock-process.js";
import { until } from "./support.js";

const admin = { user: "admin", password: "admin" };
const RSCRIPT = { "content-type": "application/x-rscript", accept: "application/json" };
const ROCKR = path.resolve(import.meta.dirname, "../interop/rockr-client.R");

/**
 * The real server in a process of its own, stopped with SIGTERM or killed with SIGKILL and started
 * again on the same data folder, uids and port: what a service manager, `docker compose up` with a
 * new image or a crash does to it.
 */
describe("sessions across a restart of the server process (SIGTERM, SIGKILL), and rockr across both", function () {
  this.timeout(180_000);
  const started: RockProcess[] = [];
  let dataDir: string;

  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "rock-restart-"));
  });
  afterEach(async () => {
    for (const p of started.splice(0)) await p.kill();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** A server on the test's data folder; `again`: the process it replaces (same uids and port). */
  const serve = async (env: Record<string, string>, again?: RockProcess): Promise<RockProcess> => {
    const rock = await spawnRock(env, { dataDir, ...(again ? { uids: again.uids, port: again.port } : {}) });
    started.push(rock);
    await untilAnswers(rock.url, "/_check", 200);
    return rock;
  };

  const evaluate = (rock: RockProcess, id: string, code: string) =>
    rest(rock.url, "POST", `/r/session/${id}/_eval`, { ...admin, headers: RSCRIPT, body: code });

  it("rockr's own session goes on across a suspend and across a SIGTERM and a new start", async () => {
    const first = await serve({ ROCK_R_SPARE_SESSIONS: "0" });
    const go = fs.mkdtempSync(path.join(dataDir, "go-"));
    const client: ResultPromise = execa("Rscript", ["--vanilla", ROCKR], {
      env: { R_LIBS: defaults().r.setupLibrary, ROCK_URL: first.url, ROCKR_PART: "survive", ROCKR_GO: go },
      reject: false,
      timeout: 150_000,
    });
    let out = "";
    client.stdout?.setEncoding("utf8").on("data", (t: string) => (out += t));
    await until(() => /waiting 1/.test(out) || client.exitCode !== null, 60_000);
    const id = /session (\S+)/.exec(out)?.[1];
    expect(id, out).to.be.a("string");
    expect((await rest(first.url, "POST", `/r/session/${id}/_suspend`, admin)).status).to.equal(204);
    fs.writeFileSync(path.join(go, "1"), "");

    await until(() => /waiting 2/.test(out) || client.exitCode !== null, 60_000);
    process.kill(first.pid, "SIGTERM");
    expect((await first.exited).code, first.log()).to.equal(0);
    expect(first.log()).to.match(/R session suspended for the stop/);
    const second = await serve({ ROCK_R_SPARE_SESSIONS: "0" }, first);
    fs.writeFileSync(path.join(go, "2"), "");

    const r = await client;
    expect(r.exitCode, `${r.stdout}\n${r.stderr}`).to.equal(0);
    for (const check of [
      "assigned data after a suspend",
      "random numbers go on after a suspend",
      "assigned data after a restart",
      "random numbers go on after a restart",
      "packages after a restart",
      "listed after a restart",
      "close",
    ])
      expect(r.stdout).to.include(`ok ${check}`);
    expect(second.log()).to.match(/R sessions of the previous run: 1 back/);
  });

  it("after SIGKILL, brings back the session that was checkpointed, ends the one that never was, and says which", async () => {
    const env = { ROCK_R_CHECKPOINT_IDLE_SECONDS: "1", ROCK_R_SPARE_SESSIONS: "0" };
    const first = await serve(env);
    const open = async (): Promise<string> => (await rest(first.url, "POST", "/r/sessions", admin)).json<{ id: string }>().id;
    const [saved, unsaved] = [await open(), await open()];
    // Busy from its start: never checkpointed.
    const busy = await rest(first.url, "POST", `/r/session/${unsaved}/_eval?async=true`, {
      ...admin,
      headers: RSCRIPT,
      body: "Sys.sleep(60)",
    });
    expect(busy.status).to.equal(201);
    expect((await evaluate(first, saved, "kept <- 'before the crash'; TRUE")).status).to.equal(200);
    await until(() => first.log().includes(`"session":"${saved}"`) && /R session checkpointed/.test(first.log()), 20_000);
    // Changed after the checkpoint: lost in the crash.
    expect((await evaluate(first, saved, "kept <- 'after the checkpoint'; TRUE")).status).to.equal(200);
    first.noteRServer();
    process.kill(first.pid, "SIGKILL");
    await first.exited;

    const second = await serve(env, first);
    const back = await evaluate(second, saved, "kept");
    expect(back.status, back.text).to.equal(200);
    expect(back.json()).to.equal("before the crash");
    expect((await evaluate(second, unsaved, "1")).status).to.equal(404);
    const said = second
      .log()
      .split("\n")
      .find((l) => l.includes("R sessions of the previous run"));
    expect(said, second.log()).to.include("1 back").and.include("1 ended");
    expect(said).to.include(saved).and.include(unsaved);
  });
});
