import { expect } from "chai";
import { chmod, chown, mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaults } from "../../src/config/load.js";
import type { EvalEvent, Outcome, RChild } from "../../src/r/process/child.js";
import { hasCapability, SYS_ADMIN } from "../../src/r/confine/capabilities.js";
import { assignFrame, evalFrame, type FramedSource, type SessionIdentity, type ValueFormat } from "../../src/r/wire/protocol.js";
import { RServerProcess, type RServerOptions } from "../../src/r/process/rserver.js";
import { testSessionUids } from "../support/uids.js";
import { alive, rscript, text } from "./support.js";

/** An R server started through RServerProcess over a folder of its own, forking sessions into it. */
class Served {
  private forks = 0;
  private readonly children: RChild[] = [];

  private constructor(
    readonly server: RServerProcess,
    readonly dir: string,
  ) {}

  static async start(options: Partial<RServerOptions> = {}): Promise<Served> {
    const dir = await mkdtemp(join(tmpdir(), "rock-protocol-"));
    // Isolated sessions pass through it to their own folders.
    await chmod(dir, 0o711);
    try {
      const server = await RServerProcess.start({
        executable: "R",
        log: () => undefined,
        tmpDir: dir,
        setupLibrary: defaults().r.setupLibrary,
        isolated: false,
        ...options,
      });
      return new Served(server, dir);
    } catch (error) {
      await rm(dir, { recursive: true, force: true });
      throw error;
    }
  }

  /** A session's folders, owned by the identity's uid when there is one. */
  async folders(identity?: SessionIdentity): Promise<{ work: string; tmp: string }> {
    const home = join(this.dir, `s${++this.forks}`);
    const dirs = { work: join(home, "work"), tmp: join(home, "tmp") };
    for (const folder of [home, dirs.work, dirs.tmp]) {
      await mkdir(folder, { mode: 0o700 });
      if (identity) await chown(folder, identity.uid, identity.gid);
    }
    return dirs;
  }

  async fork(identity?: SessionIdentity): Promise<RChild> {
    const { work, tmp } = await this.folders(identity);
    const child = await this.server.fork(work, tmp, identity);
    this.children.push(child);
    return child;
  }

  async stop(): Promise<void> {
    for (const child of this.children) child.kill();
    await this.server.stop();
    await rm(this.dir, { recursive: true, force: true });
  }
}

async function run(child: RChild, request: Buffer, events?: EvalEvent[]): Promise<Outcome> {
  return child.run(request, events && ((event) => events.push(event)));
}

/** The value of `code`, failing on R's error. */
async function value(child: RChild, code: string, format: ValueFormat = "json", live = false): Promise<Buffer> {
  const outcome = await run(child, evalFrame(text(code), format, live), live ? [] : undefined);
  if (!outcome.ok) throw new Error(outcome.error);
  return outcome.value;
}

const json = async (child: RChild, code: string): Promise<unknown> => JSON.parse((await value(child, code)).toString("utf8"));

async function assign(child: RChild, symbol: string, source: FramedSource): Promise<void> {
  const outcome = await run(child, assignFrame(symbol, source));
  expect(outcome, `assign ${symbol}`).to.deep.equal({ ok: true, value: Buffer.alloc(0) });
}

/** The frames of protocol-table.ts as worker.R reads and writes them: each request through the real R server. */
describe("protocol: Node and the real worker.R", function () {
  this.timeout(60_000);
  let served: Served;
  let child: RChild;
  before(async () => {
    served = await Served.start();
    child = await served.fork();
  });
  after(() => served?.stop());

  it("greets with R's version and its pid (ready), and answers ping", async () => {
    expect(served.server.version).to.equal(rscript("cat(R.version$major, R.version$minor, sep = '.')"));
    expect(alive(served.server.pid)).to.equal(true);
    await served.server.ping();
  });

  it("answers R.version as JSON (a plain list) and as R serialization", async () => {
    const version = JSON.parse((await served.server.versionValue("json")).toString("utf8")) as Record<string, unknown>;
    expect(version).to.deep.include({ language: "R", major: rscript("cat(R.version$major)") });
    await assign(child, "v", { kind: "rdata", bytes: await served.server.versionValue("rds") });
    expect(await json(child, "identical(v, R.version)")).to.equal(true);
  });

  it("forks a session into its folders, whose main socket greets with its pid", async () => {
    const { work, tmp } = await served.folders();
    const session = await served.server.fork(work, tmp);
    try {
      expect(await json(session, "Sys.getpid()")).to.equal(session.pid);
      expect(await json(session, "c(getwd(), tempdir(), Sys.getenv('HOME'))")).to.deep.equal([await realpath(work), tmp, work]);
    } finally {
      session.kill();
    }
  });

  it("refuses to fork as an identity when it is not isolated (forkFailed)", async () => {
    const identity: SessionIdentity = {
      uid: 1,
      gid: 1,
      memoryBytes: 0,
      processes: 0,
      privateTmp: false,
      network: "host",
      link: "",
      filesystem: "host",
    };
    const { work, tmp } = await served.folders();
    const refused = await served.server.fork(work, tmp, identity).catch((error: Error) => error.message);
    expect(refused).to.equal("R server could not fork: an R server that is not isolated cannot fork as an identity");
  });

  it("evaluates with each evaluation letter: JSON or R serialization, live or not", async () => {
    await assign(child, "expected", { kind: "script", text: text("list(a = 1L, b = 'é')") });
    for (const live of [false, true]) {
      expect((await value(child, "expected$b", "json", live)).toString("utf8"), `live: ${live}`).to.equal('"é"');
      await assign(child, "back", { kind: "rdata", bytes: await value(child, "expected", "rds", live) });
      expect(await json(child, "identical(back, expected)"), `live: ${live}`).to.equal(true);
    }
  });

  it("answers a value larger than R writes behind its header in one part, as JSON and as R serialization", async () => {
    const long = (await value(child, "strrep('x', 200000)")).toString("utf8");
    expect(long).to.equal(`"${"x".repeat(200000)}"`);
    await assign(child, "back", { kind: "rdata", bytes: await value(child, "as.numeric(1:100000)", "rds") });
    expect(await json(child, "identical(back, as.numeric(1:100000))")).to.equal(true);
  });

  it("assigns the value of a script and an R-serialized value, to a symbol in any script", async () => {
    await assign(child, "größe", { kind: "script", text: text("c(1, 2)") });
    expect(await json(child, "größe")).to.deep.equal([1, 2]);
    await assign(child, "nothing", { kind: "script", text: Buffer.alloc(0) });
    expect(await json(child, "is.null(nothing)")).to.equal(true);
    await assign(child, "data", { kind: "rdata", bytes: await value(child, "data.frame(x = 1:2, y = c('a', 'b'))", "rds") });
    expect(await json(child, "data$y")).to.deep.equal(["a", "b"]);
  });

  it("answers R's error, and sends a live evaluation's messages and warnings as events", async () => {
    expect(await run(child, evalFrame(text("stop('bad')"), "json"))).to.deep.equal({ ok: false, error: "Error: bad" });
    const events: EvalEvent[] = [];
    const outcome = await run(child, evalFrame(text("message('é m'); warning('w'); cat('out\\n'); 1"), "json", true), events);
    expect(outcome).to.deep.equal({ ok: true, value: Buffer.from("1") });
    expect(events).to.deep.equal([
      { kind: "message", text: "é m\n" },
      { kind: "warning", text: "w" },
      { kind: "output", text: "out\n" },
    ]);
  });
});

describe("protocol: a server that cannot start (refused)", function () {
  this.timeout(60_000);

  it("says why: the R profile's error", async () => {
    const dir = await mkdtemp(join(tmpdir(), "rock-profile-"));
    try {
      const profile = join(dir, "profile.R");
      await writeFile(profile, "stop('no profile today')\n");
      const refused = await Served.start({ profile }).then(
        (served) => served.stop().then(() => "started"),
        (error: Error) => error.message,
      );
      expect(refused).to.equal(`R profile ${profile} failed: Error: no profile today`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("protocol: forking as an identity (isolated, as root)", function () {
  this.timeout(60_000);
  let served: Served;
  let hostDir: string;
  before(async function () {
    const why = process.getuid?.() !== 0 ? "not root" : !hasCapability(SYS_ADMIN) ? "no CAP_SYS_ADMIN" : undefined;
    if (why) {
      console.log(`      skipped: ${why}`);
      this.skip();
    }
    hostDir = await mkdtemp(join(tmpdir(), "rock-host-visible-"));
    served = await Served.start({ isolated: true });
  });
  after(async () => {
    await served?.stop();
    if (hostDir) await rm(hostDir, { recursive: true, force: true });
  });

  it("confines each session as its identity says: uid, gid, limits, temporary folders, network, filesystem", async () => {
    const { first } = testSessionUids();
    const strict: SessionIdentity = {
      uid: first,
      gid: first + 1,
      memoryBytes: 2 ** 33,
      processes: 500,
      privateTmp: true,
      network: "none",
      link: "",
      filesystem: "minimal",
    };
    const loose: SessionIdentity = {
      uid: first + 2,
      gid: first + 3,
      memoryBytes: 0,
      processes: 0,
      privateTmp: false,
      network: "host",
      link: "",
      filesystem: "host",
    };
    const seen = async (identity: SessionIdentity): Promise<unknown> =>
      json(
        await served.fork(identity),
        `list(ids = c(unix::getuid(), unix::getgid()), memory = as.character(unix::rlimit_as()$cur), processes = as.character(unix::rlimit_nproc()$cur),
          hostTmp = dir.exists('${hostDir}'), interfaces = length(readLines('/proc/net/dev')) - 2L, users = length(readLines('/etc/passwd')))`,
      );
    const hostUsers = rscript("cat(length(readLines('/etc/passwd')))");
    expect(await seen(strict)).to.deep.equal({
      ids: [first, first + 1],
      memory: "8589934592",
      processes: "500",
      hostTmp: false,
      interfaces: 1,
      users: 2,
    });
    const other = (await seen(loose)) as Record<string, unknown>;
    expect(other).to.deep.include({ ids: [first + 2, first + 3], memory: "Inf", hostTmp: true, users: Number(hostUsers) });
    expect(other.processes).to.not.equal("500");
    expect(other.interfaces).to.be.greaterThan(1);
  });
});
