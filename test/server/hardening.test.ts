import { expect } from "chai";
import http from "node:http";
import http2 from "node:http2";
import * as grpcJs from "@grpc/grpc-js";
import type { HealthCheckResponse } from "../../gen/grpc-js/grpc/health/v1/health.js";
import { basic, startTestServer, type TestServer } from "../support/server.js";
import { grpcClients, metadataFor } from "../support/clients.js";
import { envelope, H2, H2_PREFACE, h2Frame, openRaw, sleep, trickle, within } from "../support/raw.js";

/**
 * Hostile and malformed requests over real sockets: connections and requests that never end
 * (finding B.7) and input that used to be answered 500 (finding D).
 */

/** Bounds small enough for quick tests; each one distinct, so a test can tell which one acted. */
const TIGHT = { idleTimeoutSeconds: 1, headersTimeoutSeconds: 0.3, requestTimeoutSeconds: 0.8, bodyIdleTimeoutSeconds: 0.5 };

/** A protobuf message that does not decode: field 1 promises 5 bytes and brings 1. */
const UNDECODABLE = Buffer.from([0x0a, 0x05, 0x61]);

const post = (path: string, user: string, headers: Record<string, string>, length: number) =>
  `POST ${path} HTTP/1.1\r\nHost: t\r\nAuthorization: ${basic(user)}\r\n` +
  Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("") +
  `Content-Length: ${length}\r\n\r\n`;

interface Answer {
  readonly status: number;
  readonly text: string;
}

/** One HTTP/1.1 request with exactly the given headers (no content type unless given). */
function send(port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("connection and request time bounds (B.7)", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ limits: TIGHT });
  });
  after(() => server?.stop());

  describe("HTTP/1.1", () => {
    it("keeps a connection that sends nothing for the idle time, then closes it", async () => {
      const conn = await openRaw(server.port);
      const closedAfter = await within(conn.closed, 3000);
      expect(closedAfter).to.be.within(900, 2000);
    });

    it("serves a connection opened early and used after more than the header time", async () => {
      const conn = await openRaw(server.port);
      await sleep(500);
      conn.socket.write("GET /no/such/path HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
      await within(conn.closed, 3000);
      expect(conn.received().toString()).to.match(/^HTTP\/1\.1 404 /);
    });

    it("answers 408 and closes when the headers trickle past the header time", async () => {
      const conn = await openRaw(server.port);
      conn.socket.write("GET /no/such/path HTTP/1.1\r\nHost: t\r\n");
      void trickle(conn.socket, `X-Slow: ${"a".repeat(100)}\r\n`, 50);
      const closedAfter = await within(conn.closed, 3000);
      expect(closedAfter).to.be.below(900);
      expect(conn.received().toString()).to.match(/^HTTP\/1\.1 408 /);
    });

    it("closes a keep-alive connection once idle for the idle time", async () => {
      const conn = await openRaw(server.port);
      conn.socket.write("GET /no/such/path HTTP/1.1\r\nHost: t\r\n\r\n");
      const closedAfter = await within(conn.closed, 3000);
      expect(conn.received().toString()).to.match(/^HTTP\/1\.1 404 /);
      // Node keeps a keep-alive connection a second longer than it tells the client (Keep-Alive: timeout=1).
      expect(closedAfter).to.be.within(900, 2500);
    });

    it("answers 408 with the error body when a request body trickles past the request time", async () => {
      const conn = await openRaw(server.port);
      conn.socket.write(post("/ws/draft/networks", "editor", { "Content-Type": "application/json" }, 100));
      void trickle(conn.socket, "x".repeat(100), 100);
      const closedAfter = await within(conn.closed, 3000);
      expect(closedAfter).to.be.within(700, 1600);
      const text = conn.received().toString();
      expect(text).to.match(/^HTTP\/1\.1 408 /);
      expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4))).to.include({
        status: "408",
        message: "Request body not received in time",
      });
    });

    it("answers 408 when a request body stops for longer than the body idle time", async () => {
      const conn = await openRaw(server.port);
      conn.socket.write(`${post("/ws/draft/networks", "editor", { "Content-Type": "application/json" }, 100)}{`);
      const closedAfter = await within(conn.closed, 3000);
      expect(closedAfter).to.be.within(400, 790);
      expect(conn.received().toString()).to.match(/^HTTP\/1\.1 408 /);
    });
  });

  describe("HTTP/2", () => {
    it("closes a session that does not finish the SETTINGS exchange within the header time", async () => {
      const conn = await openRaw(server.port);
      conn.socket.write(H2_PREFACE);
      expect(await within(conn.closed, 3000)).to.be.below(900);
    });

    it("sends GOAWAY to a session without a stream for the idle time, and closes it", async () => {
      const session = http2.connect(server.url);
      const opened = Date.now();
      const goaway = new Promise<number>((resolve) => session.once("goaway", (code: number) => resolve(code)));
      const closed = new Promise<number>((resolve) => session.once("close", () => resolve(Date.now() - opened)));
      session.on("error", () => undefined);
      expect(await within(closed, 3000)).to.be.within(900, 2000);
      expect(await goaway).to.equal(http2.constants.NGHTTP2_NO_ERROR);
    });

    it("closes a session whose header block never ends", async () => {
      const conn = await openRaw(server.port);
      // HEADERS without END_HEADERS: the server must wait for a CONTINUATION that never comes.
      conn.socket.write(
        Buffer.concat([
          H2_PREFACE,
          h2Frame(H2.SETTINGS, 0, 0),
          h2Frame(H2.SETTINGS, H2.FLAG_ACK, 0),
          h2Frame(H2.HEADERS, 0, 1, Buffer.of(0x83)),
        ]),
      );
      expect(await within(conn.closed, 3000)).to.be.within(900, 2000);
    });

    /** A POST stream to a JSON route; resolves with its reset code and when it was closed. */
    async function postStream(write: (stream: http2.ClientHttp2Stream) => void): Promise<{ code: number; after: number }> {
      const session = http2.connect(server.url);
      session.on("error", () => undefined);
      try {
        const headers = {
          ":method": "POST",
          ":path": "/ws/draft/networks",
          "content-type": "application/json",
          authorization: basic("editor"),
        };
        const stream = session.request(headers, { endStream: false });
        stream.on("error", () => undefined);
        stream.resume();
        const opened = Date.now();
        const closed = new Promise<number>((resolve) => stream.once("close", () => resolve(Date.now() - opened)));
        write(stream);
        const after = await within(closed, 3000);
        return { code: stream.rstCode ?? -1, after };
      } finally {
        session.destroy();
      }
    }

    it("resets a stream whose body does not come within the body idle time", async () => {
      const { code, after } = await postStream(() => undefined);
      expect(after).to.be.within(400, 790);
      expect(code).to.equal(http2.constants.NGHTTP2_CANCEL);
    });

    it("resets a stream whose body trickles past the request time", async () => {
      let timer: NodeJS.Timeout | undefined;
      const { code, after } = await postStream((stream) => {
        timer = setInterval(() => stream.destroyed || stream.write("x"), 100);
      });
      clearInterval(timer);
      expect(after).to.be.within(700, 1600);
      expect(code).to.equal(http2.constants.NGHTTP2_CANCEL);
    });

    it("leaves a quiet server stream (health Watch) open past every bound", async () => {
      const grpc = grpcClients(server.port);
      try {
        const watch = grpc.health.watch({ service: "" });
        const seen: HealthCheckResponse[] = [];
        let ended: string | undefined;
        watch.on("data", (m: HealthCheckResponse) => seen.push(m));
        watch.on("error", (e: grpcJs.ServiceError) => (ended ??= `error ${e.code}`));
        watch.on("end", () => (ended ??= "end"));
        await sleep(1600);
        expect(seen).to.have.length(1);
        expect(ended).to.equal(undefined);
        watch.cancel();
      } finally {
        grpc.close();
      }
    });

    it("lets a bidirectional reflection stream run past the request time while it is used", async () => {
      const client = new grpcJs.Client(`127.0.0.1:${server.port}`, grpcJs.credentials.createInsecure());
      try {
        const identity = (b: Buffer) => b;
        const stream = client.makeBidiStreamRequest("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", identity, identity);
        let answers = 0;
        stream.on("data", () => answers++);
        const status = new Promise<grpcJs.StatusObject>((resolve) => stream.on("status", resolve));
        stream.on("error", () => undefined);
        // list_services (field 7) = "", every 200 ms: each pause is short, the whole is longer than the request time.
        for (let i = 0; i < 7; i++) {
          stream.write(Buffer.from([0x3a, 0x00]));
          await sleep(200);
        }
        stream.end();
        expect((await status).code).to.equal(grpcJs.status.OK);
        expect(answers).to.equal(7);
      } finally {
        client.close();
      }
    });
  });
});

describe("bad input gets a 4xx with a message, never a 500 (D)", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server?.stop());

  it("answers 400 to bad percent-encoding in a REST path", async () => {
    for (const [path, user] of [
      ["/r/session/%E0%A4%A/commands", "user"],
      ["/ws/draft/network/%ZZ", "editor"],
    ] as const) {
      const res = await send(server.port, "GET", path, { authorization: basic(user) });
      expect(res.status, path).to.equal(400);
      expect(JSON.parse(res.text)).to.include({ status: "400", key: "invalid_argument" });
      expect(JSON.parse(res.text).message).to.match(/percent-encoding/);
    }
  });

  describe("a request message that does not decode is INVALID_ARGUMENT", () => {
    const client = () => new grpcJs.Client(`127.0.0.1:${server.port}`, grpcJs.credentials.createInsecure());
    const bad = () => UNDECODABLE;
    const identity = (b: Buffer) => b;

    it("over gRPC, unary", async () => {
      const c = client();
      try {
        const error = await new Promise<grpcJs.ServiceError | null>((resolve) =>
          c.makeUnaryRequest("/grpc.health.v1.Health/Check", bad, identity, Buffer.alloc(0), (e) => resolve(e)),
        );
        expect(error?.code).to.equal(grpcJs.status.INVALID_ARGUMENT);
      } finally {
        c.close();
      }
    });

    it("over gRPC, server and client streams", async () => {
      const c = client();
      try {
        const watch = c.makeServerStreamRequest("/grpc.health.v1.Health/Watch", bad, identity, Buffer.alloc(0));
        watch.on("data", () => undefined);
        const watched = await new Promise<grpcJs.ServiceError>((resolve) => watch.on("error", resolve));
        expect(watched.code).to.equal(grpcJs.status.INVALID_ARGUMENT);
        const upload = await new Promise<grpcJs.ServiceError | null>((resolve) => {
          const call = c.makeClientStreamRequest("/rock.r.v1.RService/UploadFile", bad, identity, metadataFor("user"), (e) => resolve(e));
          call.write(Buffer.alloc(0));
          call.end();
        });
        expect(upload?.code).to.equal(grpcJs.status.INVALID_ARGUMENT);
      } finally {
        c.close();
      }
    });

    it("over gRPC-Web", async () => {
      const res = await fetch(`${server.url}/grpc.health.v1.Health/Check`, {
        method: "POST",
        headers: { "content-type": "application/grpc-web+proto" },
        body: new Uint8Array(envelope(UNDECODABLE)),
      });
      const body = Buffer.from(await res.arrayBuffer()).toString("latin1");
      expect(body).to.match(/grpc-status: ?3\r\n/);
    });

    it("over Connect, unary and streaming", async () => {
      const unary = await fetch(`${server.url}/grpc.health.v1.Health/Check`, {
        method: "POST",
        headers: { "content-type": "application/proto" },
        body: new Uint8Array(UNDECODABLE),
      });
      expect(unary.status).to.equal(400);
      expect(((await unary.json()) as { code: string }).code).to.equal("invalid_argument");
      const stream = await fetch(`${server.url}/grpc.health.v1.Health/Watch`, {
        method: "POST",
        headers: { "content-type": "application/connect+proto" },
        body: new Uint8Array(envelope(UNDECODABLE)),
      });
      const end = Buffer.from(await stream.arrayBuffer());
      const { error } = JSON.parse(end.subarray(5).toString()) as { error: { code: string; message: string } };
      expect(error.code).to.equal("invalid_argument");
      expect(error.message).to.match(/premature EOF/);
    });
  });

  describe("a JSON body must come as application/json (a cross-site form cannot post it)", () => {
    const network = JSON.stringify({ name: [{ lang: "en", value: "Form" }] });
    const editor = { authorization: basic("editor") };

    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      it(`answers 415 to ${type}`, async () => {
        const res = await send(server.port, "POST", "/ws/draft/networks", { ...editor, "content-type": type }, network);
        expect(res.status).to.equal(415);
        expect(JSON.parse(res.text)).to.include({ status: "415" });
        expect(JSON.parse(res.text).message).to.match(/^Content-Type must be application\/json/);
      });
    }

    it("answers 415 to a body without a content type, not to an empty one", async () => {
      const bare = await send(server.port, "POST", "/ws/draft/networks", editor, network);
      expect(bare.status).to.equal(415);
      const created = await send(
        server.port,
        "POST",
        "/ws/draft/networks",
        { ...editor, "content-type": "application/json; charset=utf-8" },
        network,
      );
      expect(created.status, created.text).to.equal(201);
      const id = JSON.parse(created.text).id as string;
      const empty = await send(server.port, "PUT", `/ws/draft/network/${id}/model`, { ...editor, "content-length": "0" });
      expect(empty.status, empty.text).to.equal(204);
    });
  });
});
