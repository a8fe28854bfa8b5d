import { expect } from "chai";
import { createHash } from "node:crypto";
import { readFileSync, readdirSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as grpcJs from "@grpc/grpc-js";
import { Code, ConnectError } from "@connectrpc/connect";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import type { DownloadFileResponse, TailLogResponse, UploadFileRequest, UploadFileResponse } from "../../gen/grpc-js/rock/r/v1/rservice.js";
import { basic, startTestServer, type TestServer } from "../support/server.js";
import { connectClient, grpcClients, metadataFor, rest, type RestAnswer } from "../support/clients.js";
import { createLogger } from "../../src/server/logger.js";
import { alive, rscript, until } from "./support.js";

const RSCRIPT = { "content-type": "application/x-rscript" };
const MB = 1024 * 1024;

/** An R script as the HttpBody of a grpc-js request. */
const script = (code: string) => ({ contentType: "application/x-rscript", data: Buffer.from(code), extensions: [] });

/** A ts-proto message without its unset fields (a oneof decodes as every member, all but one undefined). */
function setFields<T extends object>(message: T): Partial<T> {
  return Object.fromEntries(Object.entries(message).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/** Every message of a grpc-js server stream, and how it ended (undefined: normally). */
function drain<T>(stream: grpcJs.ClientReadableStream<T>): Promise<{ items: T[]; error: grpcJs.ServiceError | undefined }> {
  return new Promise((resolve) => {
    const items: T[] = [];
    stream.on("data", (m: T) => items.push(m));
    stream.on("error", (error: grpcJs.ServiceError) => resolve({ items, error }));
    stream.on("end", () => resolve({ items, error: undefined }));
  });
}

/** Values R reads back from bytes: `code` sees them as `x` (unserialized) and prints the answer. */
async function inR(bytes: Buffer, code: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "rock-api-test-"));
  try {
    const file = join(dir, "x.rds");
    await writeFile(file, bytes);
    return rscript(`x <- unserialize(readBin('${file}', 'raw', ${bytes.length})); ${code}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The process group of a process (an R session's is its R server's pid). */
function groupOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
}

/** Processes of a process group (the R server's: the server and the sessions it forked). */
function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Fields after the command name (which may hold spaces): state ppid pgrp …
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) === pgid && fields[0] !== "Z") members.push(Number(entry));
    } catch {
      // Gone while listing.
    }
  }
  return members;
}

/** A multipart/form-data body whose parts come in the given order. */
function multipart(parts: Array<{ name: string; value: string | Buffer; filename?: string }>): { body: Buffer; type: string } {
  const boundary = `----rock-test-${Date.now()}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.filename ? `; filename="${part.filename}"` : ""}`;
    const type = part.filename ? "Content-Type: application/octet-stream\r\n" : "";
    chunks.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${type}\r\n`),
      Buffer.from(part.value),
      Buffer.from("\r\n"),
    );
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), type: `multipart/form-data; boundary=${boundary}` };
}

describe("R service through real sockets (REST, gRPC, Connect)", function () {
  this.timeout(120_000);
  let server: TestServer;
  let grpc: ReturnType<typeof grpcClients>;
  /** Warnings of the service log, kept to wait on (the server's log file has them too). */
  const SPARE_DIED = "spare R session process died";
  const warnings: string[] = [];
  const destination = { write: (line: string) => void warnings.push(line) };

  before(async () => {
    // Tests keep their sessions open: no per-user session limit here (limits are tested on their own).
    server = await startTestServer({
      r: { startOnBoot: true, maxSessionsPerUser: 0 },
      logger: createLogger({ level: "warn", destination }),
    });
    grpc = grpcClients(server.port);
  });
  after(async () => {
    grpc?.close();
    await server?.stop();
  });

  const call = (method: string, path: string, user: string, o: { body?: string | Uint8Array; headers?: Record<string, string> } = {}) =>
    rest(server.url, method, path, { user, ...o });

  async function newSession(user = "user"): Promise<string> {
    const res = await call("POST", "/r/sessions", user, { headers: { "content-type": "application/json" } });
    expect(res.status, res.text).to.equal(201);
    return res.json<{ id: string }>().id;
  }

  const evalR = (id: string, code: string, user = "user", headers: Record<string, string> = {}): Promise<RestAnswer> =>
    call("POST", `/r/session/${id}/_eval`, user, { body: code, headers: { ...RSCRIPT, ...headers } });

  describe("Execute", () => {
    it("streams output, message and warning in order, then the JSON value, over gRPC", async () => {
      const id = await newSession();
      const code = "cat('printed\\n'); message('a message'); warning('a warning'); list(a = 1:2, b = 'x')";
      const { items, error } = await drain(grpc.r.execute({ id, script: script(code), accept: "" }, metadataFor("user")));
      expect(error).to.equal(undefined);
      expect(items.map(setFields)).to.deep.equal([
        { output: "printed\n" },
        { message: "a message\n" },
        { warning: "a warning" },
        { json: { a: [1, 2], b: "x" } },
      ]);
    });

    it("answers the value as R serialization when octet-stream is asked for", async () => {
      const id = await newSession();
      const code = "list(a = 1:3, f = factor(c('u', 'v')))";
      const { items } = await drain(grpc.r.execute({ id, script: script(code), accept: "application/octet-stream" }, metadataFor("user")));
      expect(items).to.have.length(1);
      const rdata = Buffer.from(items[0]!.rdata!);
      expect(await inR(rdata, `cat(identical(x, ${code}))`)).to.equal("TRUE");
    });

    it("ends with the R error as its last event", async () => {
      const id = await newSession();
      const code = "cat('before\\n'); f <- function() stop('boom'); f(); cat('never\\n')";
      const { items, error } = await drain(grpc.r.execute({ id, script: script(code), accept: "" }, metadataFor("user")));
      expect(error).to.equal(undefined);
      expect(items.map(setFields)).to.deep.equal([{ output: "before\n" }, { error: "Error in f(): boom" }]);
    });

    it("interrupts R when the gRPC call is cancelled; the session and its variables stay", async () => {
      const id = await newSession();
      expect((await evalR(id, "kept <- 41")).status).to.equal(200);
      const stream = grpc.r.execute({ id, script: script("cat('spinning\\n'); repeat {}"), accept: "" }, metadataFor("user"));
      const ended = drain(stream);
      await new Promise<void>((resolve) => stream.once("data", () => resolve()));
      const busy = await call("GET", `/r/session/${id}`, "user");
      expect(busy.json<{ busy: boolean }>().busy).to.equal(true);
      stream.cancel();
      const { items, error } = await ended;
      expect(items.map(setFields)).to.deep.equal([{ output: "spinning\n" }]);
      expect(error?.code).to.equal(1 /* CANCELLED */);
      // Operations on a session run one at a time: this answers only once the loop was interrupted.
      const after = await evalR(id, "kept + 1");
      expect(after.status, after.text).to.equal(200);
      expect(after.text).to.equal("42");
    });

    it("streams newline-delimited JSON over REST", async () => {
      const id = await newSession();
      const res = await call("POST", `/r/session/${id}/_execute`, "user", {
        body: "cat('one\\n'); message('two'); warning('three'); 1:3",
        headers: RSCRIPT,
      });
      expect(res.status).to.equal(200);
      expect(res.headers.get("content-type")).to.equal("application/x-ndjson");
      expect(res.text.endsWith("\n")).to.equal(true);
      const lines = res.text
        .trimEnd()
        .split("\n")
        .map((line) => JSON.parse(line) as unknown);
      expect(lines).to.deep.equal([{ output: "one\n" }, { message: "two\n" }, { warning: "three" }, { json: [1, 2, 3] }]);
      const failed = await call("POST", `/r/session/${id}/_execute`, "user", { body: "stop('bad')", headers: RSCRIPT });
      expect(failed.status).to.equal(200);
      expect(JSON.parse(failed.text.trimEnd().split("\n").pop()!)).to.deep.equal({ error: "Error: bad" });
    });
  });

  describe("console log", () => {
    it("tails over gRPC: the last lines, then a line a session prints, until cancelled; GetLog over REST", async () => {
      const id = await newSession();
      await evalR(id, "cat('tail-a\\ntail-b\\n')");
      const stream = grpc.r.tailLog({ limit: 2, follow: true }, metadataFor("manager"));
      const lines: string[] = [];
      stream.on("data", (m: TailLogResponse) => lines.push(m.line));
      const ended = new Promise<grpcJs.ServiceError | undefined>((resolve) => {
        stream.on("error", (error: grpcJs.ServiceError) => resolve(error));
        stream.on("end", () => resolve(undefined));
      });
      await until(() => lines.length === 2);
      expect(lines).to.deep.equal(["tail-a", "tail-b"]);
      await evalR(id, "cat('tail-c\\n')");
      await until(() => lines.length === 3);
      expect(lines[2]).to.equal("tail-c");
      stream.cancel();
      expect((await ended)?.code).to.equal(1 /* CANCELLED */);

      const log = await call("GET", "/rserver/_log?limit=2", "manager", { headers: { accept: "text/plain" } });
      expect(log.status).to.equal(200);
      expect(log.headers.get("content-type")).to.match(/^text\/plain/);
      expect(log.text).to.equal("tail-b\ntail-c\n");
      expect((await call("GET", "/rserver/_log", "user", { headers: { accept: "text/plain" } })).status).to.equal(403);
    });

    it("logs what a plain eval prints, its messages and its warnings, in R's order", async () => {
      const id = await newSession();
      const res = await evalR(id, "cat('order-1\\n'); message('order-2'); f <- function() warning('order-3'); f(); cat('order-4\\n'); 5");
      expect(res.text).to.equal("5");
      const ours = async () => {
        const log = await call("GET", "/rserver/_log?limit=50", "manager", { headers: { accept: "text/plain" } });
        return log.text.split("\n").filter((line) => line.includes("order-"));
      };
      await until(async () => (await ours()).length === 4);
      expect(await ours()).to.deep.equal(["order-1", "order-2", "Warning: In f(): order-3", "order-4"]);
    });
  });

  describe("evaluation over REST", () => {
    it("interrupts a running sync eval from a second request", async () => {
      const id = await newSession();
      const running = evalR(id, `x <- 1; cat("looping ${id}\\n"); repeat {}`);
      // Busy is set when the request is sent; the printed line says R is inside the loop.
      await until(async () => (await call("GET", "/rserver/_log?limit=100", "manager")).text.includes(`looping ${id}`));
      const interrupt = await call("POST", `/r/session/${id}/_interrupt`, "user");
      expect(interrupt.status).to.equal(200);
      expect(interrupt.json()).to.deep.equal({ interrupted: true });
      const res = await running;
      expect(res.status).to.equal(400);
      expect(res.json<{ message: string }>().message).to.equal("Error: evaluation interrupted");
      expect((await evalR(id, "x")).text).to.equal("1");
      const idle = await call("POST", `/r/session/${id}/_interrupt`, "user");
      expect(idle.json()).to.deep.equal({ interrupted: false });
    });

    it("queues eval and assign with async=TRUE: 201, Location, command; result 204 then 200", async () => {
      const id = await newSession();
      const res = await call("POST", `/r/session/${id}/_eval?async=TRUE`, "user", { body: "Sys.sleep(0.5); 6 * 7", headers: RSCRIPT });
      expect(res.status, res.text).to.equal(201);
      const command = res.json<{ id: string; sessionId: string; status: string; finished: boolean; script: string }>();
      expect(res.headers.get("location")).to.equal(`${server.url}/r/session/${id}/command/${command.id}`);
      expect(command).to.include({ sessionId: id, finished: false, script: "Sys.sleep(0.5); 6 * 7" });
      expect(command.status).to.be.oneOf(["PENDING", "IN_PROGRESS"]);
      const early = await call("GET", `/r/session/${id}/command/${command.id}/result`, "user");
      expect(early.status).to.equal(204);
      expect(early.bytes.length).to.equal(0);
      const result = await call("GET", `/r/session/${id}/command/${command.id}/result?wait=TRUE`, "user");
      expect(result.status).to.equal(200);
      expect(result.headers.get("content-type")).to.equal("application/json");
      expect(result.text).to.equal("42");
      // rm defaults to true: the command is gone once its result was answered.
      expect((await call("GET", `/r/session/${id}/command/${command.id}`, "user")).status).to.equal(404);

      const assigned = await call("POST", `/r/session/${id}/_assign?s=y&async=TRUE`, "user", { body: "c(1, 2)", headers: RSCRIPT });
      expect(assigned.status).to.equal(201);
      const assign = assigned.json<{ id: string; script: string }>();
      expect(assign.script).to.equal("y <- c(1, 2)");
      expect(assigned.headers.get("location")).to.equal(`${server.url}/r/session/${id}/command/${assign.id}`);
      const done = await call("GET", `/r/session/${id}/command/${assign.id}?wait=TRUE`, "user");
      expect(done.json()).to.include({ status: "COMPLETED", finished: true, withResult: false });
      expect((await call("GET", `/r/session/${id}/command/${assign.id}/result`, "user")).status).to.equal(204);
      expect((await evalR(id, "sum(y)")).text).to.equal("3");
    });

    it("answers R serialization for Accept: application/octet-stream", async () => {
      const id = await newSession();
      const code = "list(n = c(1.5, NA), s = 'é', d = as.Date('2024-02-29'), m = matrix(1:4, 2))";
      const res = await evalR(id, code, "user", { accept: "application/octet-stream, application/json" });
      expect(res.status).to.equal(200);
      expect(res.headers.get("content-type")).to.equal("application/octet-stream");
      expect(await inR(res.bytes, `cat(identical(x, ${code}))`)).to.equal("TRUE");
      const json = await evalR(id, "1:2", "user", { accept: "application/json, application/octet-stream" });
      expect(json.headers.get("content-type")).to.equal("application/json");
      expect(json.text).to.equal("[1,2]");
    });

    it("round-trips an application/x-rdata assign byte for byte", async () => {
      const id = await newSession();
      const base64 = rscript("cat(jsonlite::base64_enc(serialize(list(a = 1:3, b = factor(c('u', 'v')), c = pi, e = NULL), NULL)))");
      const sent = Buffer.from(base64, "base64");
      const assigned = await call("POST", `/r/session/${id}/_assign?s=v`, "user", {
        body: base64,
        headers: { "content-type": "application/x-rdata" },
      });
      expect(assigned.status, assigned.text).to.equal(200);
      expect(assigned.bytes.length).to.equal(0);
      const back = await evalR(id, "v", "user", { accept: "application/octet-stream" });
      expect(back.bytes.equals(sent)).to.equal(true);
    });

    it("answers an R error with 400 and the error body", async () => {
      const id = await newSession();
      const res = await evalR(id, "f <- function() stop('boom'); f()");
      expect(res.status).to.equal(400);
      expect(res.headers.get("content-type")).to.equal("application/json");
      expect(res.json()).to.deep.equal({ status: "400", key: "invalid_argument", args: [], message: "Error in f(): boom" });
    });

    it("does not evaluate a script whose client left before sending all of it", async () => {
      const id = await newSession();
      const sent = "partial <- TRUE\n";
      await new Promise<void>((resolve, reject) => {
        const req = http.request(`${server.url}/r/session/${id}/_eval`, {
          method: "POST",
          headers: { authorization: basic("user"), ...RSCRIPT, "content-length": String(sent.length + 100) },
        });
        req.on("error", () => resolve());
        req.on("response", (res) => reject(new Error(`answered ${res.statusCode} to half a body`)));
        req.write(sent, () => setTimeout(() => req.destroy(), 200));
      });
      const after = await evalR(id, "exists('partial')");
      expect(after.status, after.text).to.equal(200);
      expect(after.text).to.equal("false");
    });

    it("answers over Connect too", async () => {
      const id = await newSession();
      const client = connectClient(RService, server.port, "connect", "user");
      const res = await client.eval({ id, script: { contentType: "application/x-rscript", data: Buffer.from("sum(1:10)") } });
      expect(res.answer.case).to.equal("value");
      expect(Buffer.from(res.answer.case === "value" ? res.answer.value.data : []).toString()).to.equal("55");
      const other = connectClient(RService, server.port, "connect", "user2");
      const refused = await other
        .eval({ id, script: { contentType: "application/x-rscript", data: Buffer.from("1") } })
        .catch((e: unknown) => e);
      expect(ConnectError.from(refused).code).to.equal(Code.PermissionDenied);
    });

    it("refuses another user's session with 403 (REST) and PERMISSION_DENIED (gRPC)", async () => {
      const id = await newSession("user");
      for (const [method, path] of [
        ["POST", `/r/session/${id}/_eval`],
        ["GET", `/r/session/${id}`],
        ["POST", `/r/session/${id}/_interrupt`],
        ["GET", `/r/session/${id}/_download?path=x`],
        ["DELETE", `/r/session/${id}`],
      ] as const) {
        const res = await call(method, path, "user2", method === "POST" ? { body: "1", headers: RSCRIPT } : {});
        expect(res.status, `${method} ${path}`).to.equal(403);
        expect(res.json<{ status: string }>().status).to.equal("403");
      }
      const { error } = await drain(grpc.r.execute({ id, script: script("1"), accept: "" }, metadataFor("user2")));
      expect(error?.code).to.equal(7 /* PERMISSION_DENIED */);
      // The owner's session is untouched.
      expect((await evalR(id, "1 + 1")).text).to.equal("2");
    });
  });

  describe("files", () => {
    it("uploads multipart with the form fields after the file part", async () => {
      const id = await newSession();
      const content = Buffer.from("a,b\n1,2\n");
      const form = multipart([
        { name: "file", value: content, filename: "ignored.csv" },
        { name: "path", value: "sub/dir/data.csv" },
        { name: "overwrite", value: "FALSE" },
        { name: "temp", value: "TRUE" },
      ]);
      const res = await call("POST", `/r/session/${id}/_upload`, "user", { body: form.body, headers: { "content-type": form.type } });
      expect(res.status, res.text).to.equal(200);
      expect(res.json()).to.deep.equal({ path: "sub/dir/data.csv", size: content.length });
      const read = await evalR(id, "read.csv(file.path(tempdir(), 'sub/dir/data.csv'))$b");
      expect(read.text).to.equal("2");
      // Fields after the file decide: overwrite=FALSE refuses a second upload to the same place.
      const again = await call("POST", `/r/session/${id}/_upload`, "user", { body: form.body, headers: { "content-type": form.type } });
      expect(again.status).to.equal(400);
      expect(again.json<{ message: string }>().message).to.equal("File exists and cannot be overridden");
    });

    it("uploads with grpc-js client streaming, options after the chunks", async () => {
      const id = await newSession();
      const chunks = [Buffer.alloc(100_000, 1), Buffer.alloc(50_000, 2), Buffer.from("end")];
      const answer = await new Promise<UploadFileResponse>((resolve, reject) => {
        const upload = grpc.r.uploadFile(metadataFor("user"), (err: grpcJs.ServiceError | null, res?: UploadFileResponse) =>
          err ? reject(err) : resolve(res!),
        );
        const message = (m: Partial<UploadFileRequest>): UploadFileRequest => ({ id: "", ...m });
        upload.write(message({ id }));
        for (const data of chunks) upload.write(message({ chunk: { contentType: "application/octet-stream", data, extensions: [] } }));
        upload.write(message({ path: "in/streamed.bin" }));
        upload.end();
      });
      const whole = Buffer.concat(chunks);
      expect(answer.path).to.equal("in/streamed.bin");
      expect(answer.size).to.equal(whole.length);
      const md5 = await evalR(id, "unname(tools::md5sum('in/streamed.bin'))");
      expect(JSON.parse(md5.text)).to.equal(createHash("md5").update(whole).digest("hex"));
    });

    it("streams a 200 MB raw upload without holding it in memory", async function () {
      this.timeout(180_000);
      const id = await newSession();
      const chunk = Buffer.alloc(MB);
      for (let i = 0; i < chunk.length; i += 4) chunk.writeUInt32BE(i, i);
      const count = 200;
      const hash = createHash("md5");
      const baseline = process.memoryUsage().rss;
      let peak = baseline;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
      try {
        const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = http.request(
            `${server.url}/r/session/${id}/_upload?path=big.bin`,
            { method: "POST", headers: { authorization: basic("user"), "content-type": "application/octet-stream" } },
            (res) => {
              let body = "";
              res.setEncoding("utf8");
              res.on("data", (text: string) => (body += text));
              res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
            },
          );
          req.on("error", reject);
          // The client holds one 1 MB chunk: any growth of this process is the server buffering.
          let sent = 0;
          const pump = (): void => {
            while (sent < count) {
              chunk.writeUInt32BE(sent, 0);
              hash.update(chunk);
              sent++;
              if (!req.write(chunk)) return void req.once("drain", pump);
            }
            req.end();
          };
          pump();
        });
        expect(answer.status, answer.body).to.equal(200);
        expect(JSON.parse(answer.body)).to.deep.equal({ path: "big.bin", size: count * MB });
      } finally {
        clearInterval(sampler);
      }
      expect(peak - baseline, `RSS grew by ${((peak - baseline) / MB).toFixed(0)} MB`).to.be.lessThan(100 * MB);
      const md5 = await evalR(id, "unname(tools::md5sum('big.bin'))");
      expect(JSON.parse(md5.text)).to.equal(hash.digest("hex"));
      await call("DELETE", `/r/session/${id}`, "user");
    });

    it("downloads whole over REST (read slowly too), grpc-js, Connect and gRPC-Web", async () => {
      const id = await newSession();
      // 5.3 MB of random bytes written by R: 11 chunks on the way out, read into buffers used in turn.
      await evalR(id, "set.seed(7); writeBin(as.raw(sample(0:255, 5.3e6, TRUE)), 'out.bin')");
      const expected = JSON.parse((await evalR(id, "unname(tools::md5sum('out.bin'))")).text) as string;
      const md5 = (bytes: Uint8Array) => createHash("md5").update(bytes).digest("hex");
      const res = await call("GET", `/r/session/${id}/_download?path=out.bin`, "user");
      expect(res.status).to.equal(200);
      expect(res.headers.get("content-type")).to.equal("application/octet-stream");
      expect(md5(res.bytes)).to.equal(expected);
      // A client that reads slowly: the server waits for each chunk to leave before it reads on.
      const slow = await new Promise<string>((resolve, reject) => {
        const hash = createHash("md5");
        const req = http.get(`${server.url}/r/session/${id}/_download?path=out.bin`, { headers: { authorization: basic("user") } }, (r) => {
          r.on("data", (chunk: Buffer) => {
            hash.update(chunk);
            r.pause();
            setTimeout(() => r.resume(), 2);
          });
          r.on("end", () => resolve(hash.digest("hex")));
          r.on("error", reject);
        });
        req.on("error", reject);
      });
      expect(slow).to.equal(expected);
      const { items, error } = await drain(grpc.r.downloadFile({ id, path: "out.bin", temp: false }, metadataFor("user")));
      expect(error).to.equal(undefined);
      expect(items.length).to.be.greaterThan(10);
      expect(md5(Buffer.concat(items.map((m: DownloadFileResponse) => Buffer.from(m.chunk!.data))))).to.equal(expected);
      for (const protocol of ["connect", "grpc-web"] as const) {
        const client = connectClient(RService, server.port, protocol, "user");
        const parts: Buffer[] = [];
        for await (const m of client.downloadFile({ id, path: "out.bin" })) parts.push(Buffer.from(m.chunk?.data ?? []));
        expect(md5(Buffer.concat(parts)), protocol).to.equal(expected);
      }
      const missing = await call("GET", `/r/session/${id}/_download?path=nope.bin`, "user");
      expect(missing.status).to.equal(400);
      expect(missing.json<{ message: string }>().message).to.equal("File does not exist");
    });
  });

  describe("R server and /_check", () => {
    it("checks by serving a session, without leaving a process behind", async () => {
      // Only this test's processes in the R server's group: the server, one session, the spares.
      const spareCount = server.config.r.spareSessions;
      expect((await call("DELETE", "/r/sessions", "admin")).status).to.equal(204);
      const id = await newSession();
      const sessionPid = Number((await evalR(id, "Sys.getpid()")).text);
      const serverPid = groupOf(sessionPid);
      expect(serverPid).to.be.greaterThan(0).and.not.equal(sessionPid);
      expect((await rest(server.url, "GET", "/_check")).status).to.equal(200);
      // The ended sessions' processes were sent SIGKILL, not waited for; and a spare's process is in the
      // group from R's fork on, before the service has it in its pool: the set must hold still a while.
      let last = "";
      let since = Date.now();
      await until(() => {
        const now = groupMembers(serverPid).sort().join(",");
        if (now !== last) [last, since] = [now, Date.now()];
        return groupMembers(serverPid).length === 2 + spareCount && Date.now() - since > 1000;
      }, 20_000);
      const before = groupMembers(serverPid).sort();
      for (let i = 0; i < 5; i++) expect((await rest(server.url, "GET", "/_check")).status).to.equal(200);
      const concurrent = await Promise.all([1, 2, 3].map(() => rest(server.url, "GET", "/_check")));
      expect(concurrent.map((r) => r.status)).to.deep.equal([200, 200, 200]);
      expect(groupMembers(serverPid).sort()).to.deep.equal(before);

      // Spare session processes killed from outside: Check forks another one, still answers 200, and
      // the spares are forked again.
      const spares = before.filter((pid) => pid !== serverPid && pid !== sessionPid);
      expect(spares).to.have.length(spareCount);
      const died = () => warnings.filter((line) => line.includes(SPARE_DIED)).length;
      const diedBefore = died();
      for (const pid of spares) process.kill(pid, "SIGKILL");
      await until(() => spares.every((pid) => !alive(pid)));
      // Gone is not yet noticed: a check before the service noticed would leave the spares it had not
      // noticed yet to be dropped after it, unreplaced until the next demand.
      await until(() => died() === diedBefore + spares.length);
      expect((await rest(server.url, "GET", "/_check")).status).to.equal(200);
      await until(() => groupMembers(serverPid).length === before.length);

      // A server that does not answer (stopped) fails the check, within its timeout.
      process.kill(serverPid, "SIGSTOP");
      try {
        const started = Date.now();
        expect((await rest(server.url, "GET", "/_check")).status).to.equal(500);
        expect(Date.now() - started).to.be.lessThan(8000);
      } finally {
        process.kill(serverPid, "SIGCONT");
      }
      expect((await rest(server.url, "GET", "/_check")).status).to.equal(200);
      await until(() => groupMembers(serverPid).length === before.length);
    });

    it("answers /_check 500 after DELETE /rserver; PUT /rserver starts it again", async () => {
      const id = await newSession();
      const serverPid = groupOf(Number((await evalR(id, "Sys.getpid()")).text));
      expect(groupMembers(serverPid)).to.include(serverPid);
      expect((await rest(server.url, "GET", "/_check")).status).to.equal(200);
      const stopped = await call("DELETE", "/rserver", "manager");
      expect(stopped.status).to.equal(200);
      expect(stopped.json()).to.deep.include({ running: false });
      await until(() => groupMembers(serverPid).length === 0);
      const check = await rest(server.url, "GET", "/_check");
      expect(check.status).to.equal(500);
      expect((await call("GET", `/r/session/${id}`, "user")).status).to.equal(404);
      expect((await call("POST", "/r/sessions", "user")).status).to.equal(500);

      const started = await call("PUT", "/rserver", "admin");
      expect(started.status).to.equal(200);
      expect(started.json()).to.deep.include({ running: true });
      expect((await rest(server.url, "GET", "/_check")).status).to.equal(200);
      const next = await newSession();
      expect((await evalR(next, "'back'")).text).to.equal('"back"');
    });
  });
});
