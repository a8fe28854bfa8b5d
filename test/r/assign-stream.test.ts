import { expect } from "chai";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { execa } from "execa";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { defaults } from "../../src/config/load.js";
import { connectClient, rest } from "../support/clients.js";
import { basic } from "../support/server.js";
import { spawnRock, untilAnswers, type RockProcess } from "../support/rock-process.js";

const admin = { user: "admin", password: "admin" };
const RSCRIPT = { "content-type": "application/x-rscript", accept: "application/json" };
const MIB = 1024 * 1024;

/** The resident memory of a process now and at its peak (VmRSS, VmHWM), bytes. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1]) * 1024;
  return { rss: kb("VmRSS"), peak: kb("VmHWM") };
}

/**
 * Assigns of large values as rockr and Opal send them (base64 in `_assign`), and as gRPC clients do
 * (raw serialization, in chunks or one message), against the real server in a process of its own:
 * its memory is its own there.
 */
describe("assign: large values streamed from the socket to the session", function () {
  this.timeout(240_000);
  let rock: RockProcess;
  let dir: string;
  /** R's serialization of a numeric vector of ~300 MB, its base64 (line breaks every 76), and a small data.frame's. */
  let serialized: string;
  let base64: string;
  /** The MD5 of the serialization: a value assigned, serialized again in the session, has the same. */
  let digest: string;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "rock-assign-"));
    serialized = path.join(dir, "x.rds");
    base64 = path.join(dir, "x.b64");
    execFileSync("Rscript", [
      "--vanilla",
      "-e",
      `set.seed(3); x <- runif(${(300 * MIB) / 8}); con <- file("${serialized}", "wb"); serialize(x, con); close(con)`,
    ]);
    digest = createHash("md5").update(fs.readFileSync(serialized)).digest("hex");
    execFileSync("sh", ["-c", `base64 "${serialized}" > "${base64}"`]);
    rock = await spawnRock({ ROCK_R_SPARE_SESSIONS: "2" });
    await untilAnswers(rock.url, "/_check", 200);
  });
  after(async () => {
    await rock?.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const open = async (): Promise<string> => (await rest(rock.url, "POST", "/r/sessions", admin)).json<{ id: string }>().id;
  const evaluate = async (id: string, code: string): Promise<unknown> => {
    const answer = await rest(rock.url, "POST", `/r/session/${id}/_eval`, { ...admin, headers: RSCRIPT, body: code });
    expect(answer.status, answer.text).to.equal(200);
    return answer.json();
  };
  /** curl's POST of a file as the body: the client holds nothing of it. */
  const post = (id: string, file: string, type: string, query = "s=x") =>
    execa("curl", [
      "-sS",
      "-o",
      "/dev/null",
      "-w",
      "%{http_code}",
      "-u",
      "admin:admin",
      "-H",
      `Content-Type: ${type}`,
      "--data-binary",
      `@${file}`,
      `${rock.url}/r/session/${id}/_assign?${query}`,
    ]);
  /**
   * R code making R's close() of the value pipe slow (2 s of R code, in which R takes an interrupt that
   * is pending): a client leaving then lands its interrupt in the on.exit() that closes the pipe.
   */
  const slowClose =
    'real <- base::close; unlockBinding("close", baseenv()); assign("close", function(con, ...) { if (inherits(con, "file") && endsWith(summary(con)$description, ".value-pipe")) { t <- Sys.time(); while (Sys.time() - t < 2) NULL }; real(con, ...) }, envir = baseenv()); lockBinding("close", baseenv()); TRUE';
  /** The descriptors process `pid` holds of a session's value pipe (its link ends ` (deleted)` once removed). */
  const pipesOf = (pid: number): string[] =>
    fs.readdirSync(`/proc/${pid}/fd`).filter((fd) => {
      try {
        return fs.readlinkSync(`/proc/${pid}/fd/${fd}`).includes(".value-pipe");
      } catch {
        return false;
      }
    });
  /**
   * `_assign` of the base64 as `cut` over a socket of its own, which leaves once `share` of the body is
   * sent (and 300 ms more): the client gone halfway.
   */
  const leaveHalfway = async (id: string, share: number): Promise<void> => {
    const size = fs.statSync(base64).size;
    const socket = net.connect(rock.port, "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(
      `POST /r/session/${id}/_assign?s=cut HTTP/1.1\r\nHost: x\r\nAuthorization: ${basic("admin")}\r\nContent-Type: application/x-rdata\r\nContent-Length: ${size}\r\n\r\n`,
    );
    const part = fs.createReadStream(base64, { end: Math.floor(size * share) });
    for await (const chunk of part) if (!socket.write(chunk)) await new Promise((resolve) => socket.once("drain", resolve));
    await new Promise((resolve) => setTimeout(resolve, 300));
    socket.destroy();
  };
  /** R code: whether `x` serializes to the source's bytes (its MD5), so is identical() to it. */
  const sameAsSource = 'f <- tempfile(); con <- file(f, "wb"); serialize(x, con); close(con); m <- unname(tools::md5sum(f)); unlink(f); m';

  it("takes 300 MB of base64 over REST with line breaks, identical to the source, with the server's memory barely grown", async () => {
    const id = await open();
    const before = memoryOf(rock.pid).rss;
    const r = await post(id, base64, "application/x-rdata");
    expect(r.stdout, r.stderr).to.equal("200");
    expect(memoryOf(rock.pid).peak - before, "the server's peak growth").to.be.lessThan(64 * MIB);
    expect(await evaluate(id, sameAsSource)).to.equal(digest);
  });

  it("holds four concurrent 300 MB assigns within twice its idle memory", async () => {
    const ids = await Promise.all([open(), open(), open(), open()]);
    const before = memoryOf(rock.pid).rss;
    const answers = await Promise.all(ids.map((id) => post(id, base64, "application/x-rdata")));
    for (const a of answers) expect(a.stdout, a.stderr).to.equal("200");
    // Each assign holds a few chunks; what grows with them is garbage V8 collects when it is due.
    expect(memoryOf(rock.pid).peak, "the server's peak").to.be.lessThan(2 * before);
    for (const id of ids) expect(await evaluate(id, "length(x)")).to.equal((300 * MIB) / 8);
  });

  it("takes the raw serialization over gRPC, streamed (AssignStream) and in one message (Assign)", async () => {
    const id = await open();
    const client = connectClient(RService, rock.port, "grpc", "admin");
    async function* chunks() {
      yield { id, symbol: "x", contentType: "application/octet-stream" };
      for await (const data of fs.createReadStream(serialized, { highWaterMark: 1 * MIB })) yield { chunk: { data: data as Buffer } };
    }
    await client.assignStream(chunks());
    expect(await evaluate(id, sameAsSource)).to.equal(digest);
    const small = execFileSync("Rscript", ["--vanilla", "-e", "cat(jsonlite::base64_enc(serialize(head(iris), NULL)))"], {
      encoding: "utf8",
    });
    await client.assign({ id, symbol: "y", body: { contentType: "application/octet-stream", data: Buffer.from(small, "base64") } });
    expect(await evaluate(id, "identical(y, head(iris))")).to.equal(true);
    await client.assign({ id, symbol: "z", body: { contentType: "application/x-rdata", data: Buffer.from(small) } });
    expect(await evaluate(id, "identical(z, head(iris))")).to.equal(true);
  });

  it("leaves no symbol and no pipe or spooled file when the client leaves halfway", async () => {
    const id = await open();
    await leaveHalfway(id, 1 / 2);
    const home = path.join(rock.dataDir, "sessions", id);
    const staged = () => fs.readdirSync(home).filter((f) => f.endsWith(".spool"));
    for (let i = 0; i < 100 && staged().length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(staged()).to.deep.equal([]);
    expect(await evaluate(id, "exists('cut', envir = globalenv(), inherits = FALSE)")).to.equal(false);
  });

  it("spools what comes while the session is busy and feeds it first; queued as a command, the same", async () => {
    const id = await open();
    // An evaluation of 1.5 s runs when the assign comes: its first ~100 MB wait in the spool.
    const busy = rest(rock.url, "POST", `/r/session/${id}/_eval`, { ...admin, headers: RSCRIPT, body: "Sys.sleep(1.5); 1" });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const home = path.join(rock.dataDir, "sessions", id);
    let spooled = 0;
    const watch = setInterval(() => {
      for (const f of fs.readdirSync(home).filter((n) => n.endsWith(".spool")))
        spooled = Math.max(spooled, fs.statSync(path.join(home, f)).size);
    }, 20);
    try {
      const r = await post(id, base64, "application/x-rdata");
      expect(r.stdout, r.stderr).to.equal("200");
    } finally {
      clearInterval(watch);
    }
    expect((await busy).status).to.equal(200);
    expect(spooled, "bytes spooled while R was busy").to.be.greaterThan(MIB);
    expect(await evaluate(id, sameAsSource)).to.equal(digest);

    const command = await execa("curl", [
      "-sS",
      "-u",
      "admin:admin",
      "-H",
      "Content-Type: application/x-rdata",
      "--data-binary",
      `@${base64}`,
      `${rock.url}/r/session/${id}/_assign?s=x&async=true`,
    ]);
    const commandId = (JSON.parse(command.stdout) as { id: string }).id;
    for (let i = 0; i < 200; i++) {
      const status = (await rest(rock.url, "GET", `/r/session/${id}/command/${commandId}`, admin)).json<{ status: string }>().status;
      if (status !== "PENDING" && status !== "IN_PROGRESS") {
        expect(status).to.equal("COMPLETED");
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await evaluate(id, sameAsSource)).to.equal(digest);
    expect(fs.readdirSync(home).filter((n) => n.endsWith(".spool"))).to.deep.equal([]);
    await rest(rock.url, "DELETE", `/r/session/${id}`, admin);
  });

  it("answers R's refusal of a corrupt serialization before the rest of the body, the session as it was", async () => {
    const id = await open();
    await evaluate(id, "x <- 1");
    const corrupt = path.join(dir, "corrupt.bin");
    fs.writeFileSync(corrupt, Buffer.concat([Buffer.from("X\n\0\0\0\x03"), Buffer.alloc(200 * MIB, 0xff)]));
    const started = Date.now();
    const r = await execa(
      "curl",
      [
        "-sS",
        "-w",
        "\n%{http_code} %{size_upload}",
        "-u",
        "admin:admin",
        "-H",
        "Content-Type: application/octet-stream",
        "--data-binary",
        `@${corrupt}`,
        `${rock.url}/r/session/${id}/_assign?s=x`,
      ],
      { reject: false },
    );
    const [body, codes] = r.stdout.split("\n");
    const [status, uploaded] = (codes ?? "").split(" ");
    expect(status, r.stdout + r.stderr).to.equal("400");
    expect(JSON.parse(body!).message).to.match(/unserialize|read error|unknown input format/i);
    expect(Number(uploaded), "bytes curl sent before the answer").to.be.lessThan(100 * MIB);
    expect(Date.now() - started).to.be.lessThan(30_000);
    expect(await evaluate(id, "x")).to.equal(1);
    await rest(rock.url, "DELETE", `/r/session/${id}`, admin);
  });

  it("answers a 300 MB value, R serialization or JSON, as R makes it: identical, the memory of the server and of R barely grown", async () => {
    const id = await open();
    expect((await post(id, serialized, "application/octet-stream")).stdout).to.equal("200");
    const out = path.join(dir, "answer.rds");
    const answer = (accept: string, script: string, file: string) =>
      execa("curl", [
        ...["-sS", "-o", file, "-w", "%{http_code}", "-u", "admin:admin", "-H", "Content-Type: application/x-rscript"],
        ...["-H", `Accept: ${accept}`, "--data-binary", script, `${rock.url}/r/session/${id}/_eval`],
      ]);
    // The peak resident size from now on (writing 5 to clear_refs resets VmHWM), of the server and
    // of the session's R.
    const rPid = Number(await evaluate(id, "Sys.getpid()"));
    expect(fs.readFileSync(`/proc/${rPid}/cmdline`, "latin1")).to.include("worker.R");
    for (const pid of [rock.pid, rPid]) fs.writeFileSync(`/proc/${pid}/clear_refs`, "5");
    const before = memoryOf(rock.pid).rss;
    const rBefore = memoryOf(rPid).rss;
    expect((await answer("application/octet-stream", "x", out)).stdout).to.equal("200");
    expect(memoryOf(rock.pid).peak - before, "the server's peak growth").to.be.lessThan(64 * MIB);
    // Serialized into the value pipe, not into a raw vector of 300 MB first.
    expect(memoryOf(rPid).peak - rBefore, "R's peak growth").to.be.lessThan(64 * MIB);
    expect(createHash("md5").update(fs.readFileSync(out)).digest("hex")).to.equal(digest);

    const text = path.join(dir, "answer.json");
    fs.writeFileSync(`/proc/${rock.pid}/clear_refs`, "5");
    expect((await answer("application/json", "strrep('ab', 100e6)", text)).stdout).to.equal("200");
    expect(memoryOf(rock.pid).peak - before, "the server's peak growth").to.be.lessThan(64 * MIB);
    const json = fs.readFileSync(text, "latin1");
    expect(json.length).to.equal(200e6 + 2);
    expect(json.slice(0, 5) + json.slice(-3)).to.equal('"ababab"');

    // A client that leaves after a few MB: the session answers the next call.
    const cut = await execa(
      "curl",
      [
        "-sS",
        "-o",
        "/dev/null",
        "--limit-rate",
        "4M",
        "-m",
        "1",
        "-u",
        "admin:admin",
        "-H",
        "Accept: application/octet-stream",
        "-H",
        "Content-Type: application/x-rscript",
        "--data-binary",
        "x",
        `${rock.url}/r/session/${id}/_eval`,
      ],
      { reject: false },
    );
    expect(cut.exitCode, "curl timed out").to.equal(28);
    expect(await evaluate(id, "length(x)")).to.equal((300 * MIB) / 8);

    // The session swaps its value pipe for a file of its own: R makes it anew, and the answer is whole.
    const swap = 'p <- file.path(dirname(getwd()), ".value-pipe"); unlink(p); writeLines("mine", p); y <- x[1:1e6]; TRUE';
    expect(await evaluate(id, swap)).to.equal(true);
    expect((await answer("application/octet-stream", "y", out)).stdout).to.equal("200");
    const md5OfY = await evaluate(id, sameAsSource.replaceAll("serialize(x", "serialize(y"));
    expect(createHash("md5").update(fs.readFileSync(out)).digest("hex")).to.equal(md5OfY);
    // A pipe R cannot make (a folder at its name, in a home it made read-only): the bytes come in the answer.
    const block = 'p <- file.path(dirname(getwd()), ".value-pipe"); unlink(p); dir.create(p); Sys.chmod(dirname(getwd()), "500"); TRUE';
    expect(await evaluate(id, block)).to.equal(true);
    expect((await answer("application/octet-stream", "y", out)).stdout).to.equal("200");
    expect(createHash("md5").update(fs.readFileSync(out)).digest("hex")).to.equal(md5OfY);
    expect(await evaluate(id, 'Sys.chmod(dirname(getwd()), "700"); TRUE')).to.equal(true);
    await rest(rock.url, "DELETE", `/r/session/${id}`, admin);
  });

  it("closes the value pipe before it takes the interrupt of a client that left: the session answers the next call", async () => {
    const id = await open();
    const rPid = Number(await evaluate(id, "Sys.getpid()"));
    // R's close() of the value pipe made slow (2 s of R code, where R takes an interrupt that is
    // pending): the client leaves while R closes the pipe, as it may when the interrupt lands during
    // serialize() and R takes it in the on.exit() that closes the pipe. Taken there, the close was cut
    // short and the pipe left open, and the session ended at the end of the grace time.
    expect(await evaluate(id, slowClose)).to.equal(true);
    // runif(2e5): 1.6 MB, through the pipe. The client leaves once it has most of the value's bytes (the
    // last of them leave R's file buffer when the pipe is closed): R writes the rest or closes the pipe.
    await new Promise<void>((resolve, reject) => {
      const req = http.request(`${rock.url}/r/session/${id}/_eval`, {
        method: "POST",
        headers: { authorization: basic("admin"), "content-type": "application/x-rscript", accept: "application/octet-stream" },
      });
      req.on("error", () => resolve());
      req.on("response", (res) => {
        let got = 0;
        res.on("data", (bytes: Buffer) => {
          got += bytes.length;
          if (got < 1_500_000) return;
          req.destroy();
          resolve();
        });
        res.on("end", () => reject(new Error("the answer ended before the client left")));
      });
      req.end("runif(2e5)");
    });
    expect(await evaluate(id, "1 + 1")).to.equal(2);
    // R holds no descriptor of the pipe.
    expect(pipesOf(rPid)).to.deep.equal([]);
    await rest(rock.url, "DELETE", `/r/session/${id}`, admin);
  });

  it("closes the pipe a streamed assign reads before it takes the interrupt of a client that left", async () => {
    const id = await open();
    const rPid = Number(await evaluate(id, "Sys.getpid()"));
    // R's close() of the pipe made slow, as above: the client leaves halfway, Node closes its end of
    // the pipe (R's unserialize() fails) and interrupts R, whose interrupt lands in the on.exit() that
    // closes R's end. Taken there, it cut the close short and R kept the pipe's descriptor.
    expect(await evaluate(id, slowClose)).to.equal(true);
    await leaveHalfway(id, 1 / 4);
    expect(await evaluate(id, "exists('cut', envir = globalenv(), inherits = FALSE)")).to.equal(false);
    expect(pipesOf(rPid), "R's descriptors of the pipe").to.deep.equal([]);
    await rest(rock.url, "DELETE", `/r/session/${id}`, admin);
  });

  it("ends an answer whose R code said it pipes without piping, and ends a session that says so twice", async () => {
    const id = await open();
    const rds = (script: string) =>
      rest(rock.url, "POST", `/r/session/${id}/_eval`, {
        ...admin,
        headers: { "content-type": "application/x-rscript", accept: "application/octet-stream" },
        body: script,
      });
    // A large answer first: the session's value pipe is made.
    expect((await rds("runif(2e5)")).status).to.equal(200);
    // R code writes the piping frame on its own main socket, then answers a small value.
    const piping =
      'm <- NULL; for (i in getAllConnections()) { s <- summary(getConnection(i)); if (s$class == "sockconn" && s$mode == "r+b") m <- getConnection(i) }; writeBin(as.raw(c(0x70, 0, 0, 0, 0)), m)';
    const once = await rds(`${piping}; 42L`);
    expect(once.status).to.equal(200);
    expect(once.bytes.equals((await rds("42L")).bytes), "the value as R serializes it").to.equal(true);
    // No descriptor of the pipe is left open in the server.
    expect(pipesOf(rock.pid)).to.deep.equal([]);
    // Twice in one request breaks the protocol: the session is ended, not trusted.
    expect((await rds(`${piping}; ${piping}; 1`)).status).to.not.equal(200);
    expect((await rest(rock.url, "GET", `/r/session/${id}`, admin)).status).to.equal(404);
  });

  it("answers 400 naming the offset of a byte that is not base64, 413 past limits.maxAssignBytes", async () => {
    const id = await open();
    const bad = path.join(dir, "bad.b64");
    fs.writeFileSync(bad, `${"QUJD".repeat(100)}QU*D`);
    const r = await execa("curl", [
      "-sS",
      "-u",
      "admin:admin",
      "-H",
      "Content-Type: application/x-rdata",
      "--data-binary",
      `@${bad}`,
      `${rock.url}/r/session/${id}/_assign?s=b`,
    ]);
    expect(JSON.parse(r.stdout).message).to.equal("The application/x-rdata body is not base64: byte 0x2a at offset 402");
    const truncated = await rest(rock.url, "POST", `/r/session/${id}/_assign?s=t`, {
      ...admin,
      headers: { "content-type": "application/x-rdata" },
      body: "QUJDQ",
    });
    expect(truncated.status).to.equal(400);
    const corrupt = await rest(rock.url, "POST", `/r/session/${id}/_assign?s=c`, {
      ...admin,
      headers: { "content-type": "application/x-rdata" },
      body: "QUJDRA==",
    });
    expect(corrupt.status, corrupt.text).to.equal(400);

    const limited = await spawnRock({ ROCK_MAX_ASSIGN_BYTES: "1000000" });
    try {
      await untilAnswers(limited.url, "/_check", 200);
      const sid = (await rest(limited.url, "POST", "/r/sessions", admin)).json<{ id: string }>().id;
      const over = await execa("curl", [
        "-sS",
        "-w",
        "\n%{http_code}",
        "-u",
        "admin:admin",
        "-H",
        "Content-Type: application/x-rdata",
        "--data-binary",
        `@${base64}`,
        `${limited.url}/r/session/${sid}/_assign?s=x`,
      ]);
      const [body, status] = over.stdout.split("\n");
      expect(status).to.equal("413");
      expect(JSON.parse(body!).message).to.include("limits.maxAssignBytes");
      // A script is held whole: bounded by limits.maxBodyBytes (64 MiB) with maxAssignBytes at its 16 GiB.
      const script = await rest(rock.url, "POST", `/r/session/${id}/_assign?s=s`, {
        ...admin,
        headers: { "content-type": "application/x-rscript" },
        body: `"${"a".repeat(70 * MIB)}"`,
      });
      expect(script.status, script.text).to.equal(413);
      expect(script.json<{ message: string }>().message).to.include("limits.maxBodyBytes");
    } finally {
      await limited.kill();
    }
  });

  it("lets rockr assign a 60 MB data.frame with the default limits", async () => {
    const script = `
      suppressPackageStartupMessages(library(rockr))
      conn <- rockr.connect(username = "admin", password = "admin", url = Sys.getenv("ROCK_URL"))
      rockr.open(conn)
      n <- 2.5e6
      df <- data.frame(a = runif(n), b = sample(letters, n, TRUE), c = runif(n), d = rnorm(n), stringsAsFactors = TRUE)
      stopifnot(object.size(df) > 60e6)
      rockr.assign(conn, "df", df)
      stopifnot(identical(rockr.eval(conn, quote(dim(df))), dim(df)))
      stopifnot(identical(rockr.eval(conn, quote(df[c(1, nrow(df)), ])), df[c(1, n), ]))
      rockr.close(conn)
      cat("assigned\\n")`;
    const r = await execa("Rscript", ["--vanilla", "-e", script], {
      env: { R_LIBS: defaults().r.setupLibrary, ROCK_URL: rock.url },
      reject: false,
      timeout: 180_000,
    });
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0);
    expect(r.stdout).to.include("assigned");
  });
});
