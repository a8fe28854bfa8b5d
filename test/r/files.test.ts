import { expect } from "chai";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { ConnectError, Code } from "@connectrpc/connect";
import { mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HttpBodySchema } from "../../gen/es/google/api/httpbody_pb.js";
import { UploadFileRequestSchema } from "../../gen/es/rock/r/v1/rservice_pb.js";
import type { RSession } from "../../src/r/session.js";
import { caller, collect, ctxOf, startRig, text, type Rig } from "./support.js";

const alice = caller("alice", "user");

type UploadFields = Omit<MessageInitShape<typeof UploadFileRequestSchema>, "$typeName">;

describe("session files", function () {
  this.timeout(60_000);
  let rig: Rig;
  let session: RSession;
  let outside: string;

  before(async () => {
    rig = await startRig({}, { maxUploadBytes: 64 });
    outside = await mkdtemp(join(tmpdir(), "rock-outside-"));
    writeFileSync(join(outside, "secret.txt"), "secret");
  });
  beforeEach(async () => {
    session = await rig.engine.createSession("alice");
  });
  afterEach(async () => rig.engine.endAllSessions());
  after(async () => {
    await rig?.close();
    await rm(outside, { recursive: true, force: true });
  });

  async function* messages(fields: UploadFields, chunks: string[], fieldsLast = false) {
    const meta = create(UploadFileRequestSchema, { id: session.id, ...(fieldsLast ? {} : fields) });
    yield meta;
    for (const chunk of chunks) {
      yield create(UploadFileRequestSchema, { chunk: create(HttpBodySchema, { data: text(chunk) }) });
    }
    if (fieldsLast) yield create(UploadFileRequestSchema, fields);
  }

  const upload = (fields: UploadFields, chunks = ["hello ", "world"], fieldsLast = false) =>
    rig.handlers.uploadFile!(messages(fields, chunks, fieldsLast), ctxOf(alice));

  const refusal = async (promise: Promise<unknown>): Promise<string> => {
    const error = await promise.then(() => undefined, (e: unknown) => e);
    expect(error, "expected a refusal").to.be.instanceOf(ConnectError);
    expect((error as ConnectError).code).to.equal(Code.InvalidArgument);
    return (error as ConnectError).rawMessage;
  };

  const download = async (path: string, temp = false): Promise<string> => {
    const chunks = await collect(
      rig.handlers.downloadFile!({ $typeName: "rock.r.v1.DownloadFileRequest", id: session.id, path, temp }, ctxOf(alice)),
    );
    return Buffer.concat(chunks.map((c) => (c as { chunk: { data: Uint8Array } }).chunk.data)).toString();
  };

  it("uploads into the work folder, creating folders, with fields before or after the file", async () => {
    const res = await upload({ path: "/a/b/c.txt" });
    expect(res).to.deep.include({ path: "a/b/c.txt", size: 11 });
    expect(readFileSync(join(session.dirs.work, "a/b/c.txt"), "utf8")).to.equal("hello world");
    await upload({ fileName: "named.txt", temp: true }, ["x"], true);
    expect(readFileSync(join(session.dirs.tmp, "named.txt"), "utf8")).to.equal("x");
    expect((await session.eval(text("readLines(file.path(tempdir(), 'named.txt'), warn = FALSE)"), "json")).toString())
      .to.equal('"x"');
    expect(readdirSync(session.dirs.home).sort()).to.deep.equal(["tmp", "work"]);
  });

  it("refuses an upload past the size limit (gRPC and Connect callers; REST stops at the edge) and keeps nothing", async () => {
    const error = await upload({ path: "big.txt" }, ["x".repeat(40), "y".repeat(40)]).then(() => undefined, (e: unknown) => e);
    expect((error as ConnectError).code).to.equal(Code.ResourceExhausted);
    expect(readdirSync(session.dirs.work)).to.deep.equal([]);
    expect(readdirSync(session.dirs.home).sort()).to.deep.equal(["tmp", "work"]);
  });

  it("refuses existing files unless overwrite, folders, and paths leaving the root", async () => {
    await upload({ path: "f.txt" });
    expect(await refusal(upload({ path: "f.txt" }))).to.equal("File exists and cannot be overridden");
    await upload({ path: "f.txt", overwrite: true }, ["new"]);
    expect(readFileSync(join(session.dirs.work, "f.txt"), "utf8")).to.equal("new");
    mkdirSync(join(session.dirs.work, "dir"));
    expect(await refusal(upload({ path: "dir", overwrite: true }))).to.equal("Destination file cannot be a directory");
    expect(await refusal(upload({ path: "../escape.txt" }))).to.equal("Destination folder is not valid");
    expect(await refusal(upload({ path: "a/../../../escape.txt" }))).to.equal("Destination folder is not valid");
    symlinkSync(outside, join(session.dirs.work, "link"));
    expect(await refusal(upload({ path: "link/x.txt" }))).to.equal("Destination folder is not valid");
    symlinkSync(join(outside, "secret.txt"), join(session.dirs.work, "secret-link"));
    expect(await refusal(upload({ path: "secret-link", overwrite: true }))).to.equal("Destination folder is not valid");
    expect(readFileSync(join(outside, "secret.txt"), "utf8")).to.equal("secret");
    expect(readdirSync(outside)).to.deep.equal(["secret.txt"]);
    expect(readdirSync(session.dirs.home).sort()).to.deep.equal(["tmp", "work"]);
  });

  it("downloads in chunks, refusing missing files, folders and paths leaving the root", async () => {
    const big = "0123456789abcdef".repeat(40_000);
    writeFileSync(join(session.dirs.work, "big.txt"), big);
    const chunks = await collect(
      rig.handlers.downloadFile!(
        { $typeName: "rock.r.v1.DownloadFileRequest", id: session.id, path: "/big.txt", temp: false },
        ctxOf(alice),
      ),
    );
    expect(chunks.length).to.be.greaterThan(1);
    expect((chunks[0] as { chunk: { contentType: string } }).chunk.contentType).to.equal("application/octet-stream");
    expect(await download("big.txt")).to.equal(big);
    writeFileSync(join(session.dirs.tmp, "t.txt"), "temp");
    expect(await download("t.txt", true)).to.equal("temp");
    expect(await refusal(download("missing.txt"))).to.equal("File does not exist");
    mkdirSync(join(session.dirs.work, "d"));
    expect(await refusal(download("d"))).to.equal("File is a directory");
    expect(await refusal(download("../../../../etc/passwd"))).to.equal("Source file path is not valid");
    symlinkSync(join(outside, "secret.txt"), join(session.dirs.work, "leak"));
    expect(await refusal(download("leak"))).to.equal("Source file path is not valid");
  });

  describe("against a session racing its own paths (isolated sessions)", () => {
    before(function () {
      if (process.getuid?.() !== 0) this.skip();
    });

    /** R, in the background of the session: `sub` flips between a folder and a symlink to `outside`. */
    const flipSub = (target: string): string =>
      `dir.create('sub'); writeLines('mine', 'sub/x.txt'); parallel::mcparallel(repeat { file.rename('sub', 'sub.real'); file.symlink('${target}', 'sub'); unlink('sub'); file.rename('sub.real', 'sub') }, detached = TRUE); TRUE`;

    it("never writes outside the session when a checked folder is swapped for a symlink", async () => {
      await session.eval(text(flipSub(outside)), "json");
      for (let i = 0; i < 150; i++) await upload({ path: "sub/planted.txt", overwrite: true }, ["planted"]).catch(() => undefined);
      expect(readdirSync(outside)).to.deep.equal(["secret.txt"]);
    });

    it("never reads outside the session when a checked folder is swapped for a symlink", async () => {
      writeFileSync(join(outside, "x.txt"), "root's secret", { mode: 0o600 });
      try {
        await session.eval(text(flipSub(outside)), "json");
        const seen = new Set<string>();
        for (let i = 0; i < 150; i++) seen.add(await download("sub/x.txt").catch(() => "refused"));
        expect([...seen].filter((s) => s !== "mine\n" && s !== "refused")).to.deep.equal([]);
      } finally {
        rmSync(join(outside, "x.txt"), { force: true });
      }
    });
  });
});
