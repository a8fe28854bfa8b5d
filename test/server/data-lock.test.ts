/**
 * One data folder, one server: a second server given a folder another runs on is refused at once with
 * one line naming the folder and the holder's pid (not by LevelDB half-way through its start); a closed
 * server lets go of it and leaves no lock file, a killed one lets go with its death.
 */
import { expect } from "chai";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startRock } from "../../src/compose.js";
import { openTestLog } from "../support/logs.js";
import { runMain } from "../support/main-process.js";
import { freePort, startOnFolder } from "../networks/server-support.js";
import { PROCESS_USERS, spawnRock, untilAnswers, type RockProcess } from "../support/rock-process.js";
import { testConfig, testLogger } from "../support/server.js";
import { testLockDir } from "../support/uids.js";

const refusal = (dataDir: string, pid: number): string =>
  `The data folder ${dataDir} (dataDir, ROCK_DATA_DIR) is in use by another rock-ts server, pid ${pid}: give this one a folder of its own`;

const root = process.getuid?.() === 0;

describe("one data folder, one server", function () {
  this.timeout(60_000);
  let first: RockProcess | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await first?.kill();
    first = undefined;
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it("refuses a second server process on the folder at once, with one line naming it and the holder's pid; the first serves on", async () => {
    first = await spawnRock({ ROCK_R_START: "false" });
    await untilAnswers(first.url, "/_info", 200);
    const lock = join(first.dataDir, ".lock");
    expect(readFileSync(lock, "utf8")).to.equal(`${first.pid}\n`);

    const second = await runMain([], {
      env: {
        ROCK_DATA_DIR: first.dataDir,
        ROCK_PORT: String(await freePort()),
        ROCK_HOST: "127.0.0.1",
        ROCK_USERS: PROCESS_USERS,
        ROCK_R_START: "false",
      },
      timeoutMs: 30_000,
    });
    expect(second.code, second.stderr).to.equal(1);
    const errors = second.stderr.split("\n").filter((line) => line.includes('"level":"error"'));
    expect(errors, second.stderr).to.have.length(1);
    expect(JSON.parse(errors[0]!)).to.include({ msg: "could not start", error: refusal(first.dataDir, first.pid) });
    expect(second.stderr).to.not.include("Database failed to open");

    expect(readFileSync(lock, "utf8")).to.equal(`${first.pid}\n`);
    expect((await fetch(`${first.url}/_info`)).status).to.equal(200);
  });

  it("in one process too; a closed server lets go of its folder (and, as root, of its uids) and leaves no lock file", async () => {
    dir = mkdtempSync(join(tmpdir(), "rock-data-lock-"));
    const config = testConfig(dir);
    // Its log kept by the run (a failure shows its tail), never printed.
    const logger = testLogger(openTestLog("the servers on one data folder, in this process"));
    const rock = await startRock(config, { logger, announce: () => {} });
    const uidLock = join(testLockDir(), `uids-${config.r.sessionUids.first}-${config.r.sessionUids.last}.lock`);
    expect(existsSync(join(dir, ".lock"))).to.equal(true);
    expect(existsSync(uidLock), "the uids' lock as root").to.equal(root);

    const refused = await startRock(testConfig(dir), { logger, announce: () => {} }).then(
      async (other) => {
        await other.close();
        return undefined;
      },
      (e: Error) => e,
    );
    expect(refused?.message).to.equal(refusal(dir, process.pid));

    await rock.close();
    expect(existsSync(join(dir, ".lock")), "the folder's lock file after the close").to.equal(false);
    expect(existsSync(uidLock), "the uids' lock file after the close").to.equal(false);
    // Both let go of: the same folder and uids again.
    const again = await startRock(config, { logger, announce: () => {} });
    await again.close();
  });

  it("gives the folder of a killed server to the next start", async () => {
    first = await spawnRock({ ROCK_R_START: "false" });
    await untilAnswers(first.url, "/_info", 200);
    process.kill(first.pid, "SIGKILL");
    await first.exited;
    expect(readFileSync(join(first.dataDir, ".lock"), "utf8"), "the dead server's lock file").to.equal(`${first.pid}\n`);
    const next = await startOnFolder(first.dataDir);
    expect(readFileSync(join(first.dataDir, ".lock"), "utf8")).to.equal(`${process.pid}\n`);
    expect((await fetch(`${next.url}/_info`)).status).to.equal(200);
    await next.stop();
  });
});
