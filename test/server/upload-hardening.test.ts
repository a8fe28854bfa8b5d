import { expect } from "chai";
import { readdirSync } from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import { basic, startTestServer, type TestServer } from "../support/server.js";
import { rest } from "../support/clients.js";
import { sleep } from "../support/raw.js";

/**
 * Uploads that are hostile, malformed or merely slow, over real sockets to a server with R: a 4xx
 * with a message (never a 500 or a reset), no staging file left behind, and slow but steady uploads
 * not cut by the request time bound (findings B.7 and D).
 */

const LIMIT = 256 * 1024;
const RSCRIPT = { "content-type": "application/x-rscript" };

interface Answer {
  readonly status: number;
  readonly text: string;
}

describe("uploads: bad, truncated, oversize and slow", function () {
  this.timeout(60_000);
  let server: TestServer;

  before(async () => {
    server = await startTestServer({
      r: { startOnBoot: true },
      limits: { maxUploadBytes: LIMIT, requestTimeoutSeconds: 0.8, bodyIdleTimeoutSeconds: 0.5 },
    });
  });
  after(() => server?.stop());

  /** rockr's way: POST with Content-Type application/json and no body. */
  async function newSession(): Promise<string> {
    const res = await rest(server.url, "POST", "/r/sessions", { user: "user", headers: { "content-type": "application/json" } });
    expect(res.status, res.text).to.equal(201);
    return res.json<{ id: string }>().id;
  }

  /** Staging files of an upload in progress live in the session's folder, beside its working folder. */
  async function stagingFiles(id: string): Promise<string[]> {
    const res = await rest(server.url, "POST", `/r/session/${id}/_eval`, {
      user: "user",
      headers: RSCRIPT,
      body: "normalizePath(dirname(getwd()))",
    });
    expect(res.status, res.text).to.equal(200);
    const home = [JSON.parse(res.text) as string | string[]].flat()[0]!;
    return readdirSync(home).filter((name) => name.startsWith(".upload-"));
  }

  async function noStagingFileLeft(id: string): Promise<void> {
    const end = Date.now() + 5000;
    let left = await stagingFiles(id);
    while (left.length > 0 && Date.now() < end) {
      await sleep(100);
      left = await stagingFiles(id);
    }
    expect(left).to.deep.equal([]);
  }

  /**
   * An upload written by `write` (which ends the request or leaves it hanging); resolves with the
   * answer, or with status 0 when the connection closed without one.
   */
  function upload(id: string, path: string, headers: Record<string, string>, write: (req: http.ClientRequest) => void): Promise<Answer> {
    return new Promise((resolve) => {
      const req = http.request({
        host: "127.0.0.1",
        port: server.port,
        method: "POST",
        path: `/r/session/${id}/_upload?path=${encodeURIComponent(path)}`,
        headers: { authorization: basic("user"), ...headers },
        agent: false,
      });
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        res.on("error", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      });
      req.on("error", () => resolve({ status: 0, text: "" }));
      write(req);
    });
  }

  const octets = { "content-type": "application/octet-stream" };

  it("refuses a path over 1024 bytes or a name over 255 bytes with 400 and a message", async () => {
    const id = await newSession();
    const long = await upload(id, "a".repeat(5000), octets, (req) => req.end("data"));
    expect(long.status, long.text).to.equal(400);
    expect(JSON.parse(long.text).message).to.equal("File path is longer than 1024 bytes");
    const name = await upload(id, `dir/${"n".repeat(300)}.csv`, octets, (req) => req.end("data"));
    expect(name.status, name.text).to.equal(400);
    expect(JSON.parse(name.text).message).to.equal("A file or folder name in the path is longer than 255 bytes");
    const download = await rest(server.url, "GET", `/r/session/${id}/_download?path=${"b".repeat(5000)}`, { user: "user" });
    expect(download.status).to.equal(400);
    await noStagingFileLeft(id);
  });

  it("answers 400 to a multipart body that ends before its closing boundary, leaving no staging file", async () => {
    const id = await newSession();
    const partial = `--XB\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nhello, trunc`;
    const res = await upload(id, "t.txt", { "content-type": "multipart/form-data; boundary=XB" }, (req) => req.end(partial));
    expect(res.status, res.text).to.equal(400);
    expect(JSON.parse(res.text)).to.include({ status: "400", message: "Malformed multipart body: Unexpected end of form" });
    await noStagingFileLeft(id);
    const listed = await rest(server.url, "POST", `/r/session/${id}/_eval`, {
      user: "user",
      headers: RSCRIPT,
      body: "file.exists('t.txt')",
    });
    expect(listed.text).to.equal("false");
  });

  it("leaves no staging file when the client leaves in the middle of a multipart upload", async () => {
    const id = await newSession();
    const head = `--XB\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\n`;
    const res = await upload(id, "gone.bin", { "content-type": "multipart/form-data; boundary=XB" }, (req) => {
      req.write(head);
      req.write(Buffer.alloc(100_000, 7), () => setTimeout(() => req.destroy(), 200));
    });
    expect(res.status).to.equal(0);
    await noStagingFileLeft(id);
  });

  it("answers 413 with the error body to a raw upload over the limit", async () => {
    const id = await newSession();
    const res = await upload(id, "big.bin", octets, (req) => {
      for (let i = 0; i < 32; i++) req.write(Buffer.alloc(64 * 1024, i));
      req.end();
    });
    expect(res.status).to.equal(413);
    expect(JSON.parse(res.text)).to.deep.equal({
      status: "413",
      key: "resource_exhausted",
      args: [],
      message: `Upload exceeds the limit of ${LIMIT} bytes`,
    });
    await noStagingFileLeft(id);
  });

  it("lets an upload whose bytes keep coming run past the request time", async () => {
    const id = await newSession();
    const res = await upload(id, "slow.bin", octets, (req) => {
      void (async () => {
        for (let i = 0; i < 15; i++) {
          req.write(Buffer.alloc(1024, i));
          await sleep(100);
        }
        req.end();
      })();
    });
    expect(res.status, res.text).to.equal(200);
    expect(JSON.parse(res.text)).to.deep.equal({ path: "slow.bin", size: 15 * 1024 });
  });

  it("answers 408 to an upload that pauses longer than the body idle time, leaving no staging file", async () => {
    const id = await newSession();
    const started = Date.now();
    const res = await upload(id, "paused.bin", { ...octets, "content-length": String(10 * 1024) }, (req) => req.write(Buffer.alloc(1024)));
    expect(res.status, res.text).to.equal(408);
    expect(Date.now() - started).to.be.below(2000);
    await noStagingFileLeft(id);
  });

  it("resets an HTTP/2 upload that pauses longer than the body idle time, and stores nothing", async () => {
    const id = await newSession();
    const session = http2.connect(server.url);
    session.on("error", () => undefined);
    try {
      const headers = {
        ":method": "POST",
        ":path": `/r/session/${id}/_upload?path=h2.bin`,
        "content-type": "application/octet-stream",
        authorization: basic("user"),
      };
      const stream = session.request(headers, { endStream: false });
      stream.on("error", () => undefined);
      stream.resume();
      stream.write(Buffer.alloc(1024));
      await new Promise((resolve) => stream.once("close", resolve));
      expect(stream.rstCode).to.equal(http2.constants.NGHTTP2_CANCEL);
    } finally {
      session.destroy();
    }
    await noStagingFileLeft(id);
    const stored = await rest(server.url, "POST", `/r/session/${id}/_eval`, {
      user: "user",
      headers: RSCRIPT,
      body: "file.exists('h2.bin')",
    });
    expect(stored.text).to.equal("false");
  });
});
