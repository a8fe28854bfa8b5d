import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import { gunzipSync, gzipSync } from "node:zlib";
import { create, fromBinary, toBinary, toJsonString, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type * as grpc from "@grpc/grpc-js";
import {
  EvalRequestSchema,
  ExecuteRequestSchema,
  ExecuteResponseSchema,
  GetSessionRequestSchema,
} from "../../gen/es/rock/r/v1/rservice_pb.js";
import { HealthCheckRequestSchema } from "../../gen/es/grpc/health/v1/health_pb.js";
import { call, grpcClients, metadataFor, type GrpcClients } from "../support/clients.js";
import { basic, startTestServer, type TestServer } from "../support/server.js";

/** One exchange as the wire shows it: what both paths must answer alike. */
interface Exchange {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
  readonly trailers: Record<string, string>;
}

interface Ask {
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: Uint8Array;
}

type Wire = "grpc" | "grpc-web" | "connect";
type Codec = "proto" | "json";

const CONTENT_TYPE: Record<Wire, Record<Codec, string>> = {
  grpc: { proto: "application/grpc", json: "application/grpc+json" },
  "grpc-web": { proto: "application/grpc-web+proto", json: "application/grpc-web+json" },
  connect: { proto: "application/proto", json: "application/json" },
};

/** Headers whose values differ between any two answers (or servers) and say nothing of the protocol. */
const VOLATILE = new Set(["date"]);

function pick(h: http.IncomingHttpHeaders | http2.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (k.startsWith(":") || VOLATILE.has(k) || v === undefined) continue;
    out[k] = Array.isArray(v) ? v.join(", ") : String(v);
  }
  return out;
}

function exchangeH2(port: number, ask: Ask): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", reject);
    const stream = session.request({ ":method": "POST", ":path": ask.path, te: "trailers", ...ask.headers });
    let status = 0;
    let headers: Record<string, string> = {};
    let trailers: Record<string, string> = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      headers = pick(h);
    });
    stream.on("trailers", (t) => (trailers = pick(t)));
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("error", reject);
    stream.on("close", () => {
      session.close();
      resolve({ status, headers, body: Buffer.concat(chunks), trailers });
    });
    stream.end(ask.body);
  });
}

function exchangeH1(port: number, ask: Ask): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path: ask.path, headers: ask.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const headers = pick(res.headers);
        // Node's HTTP/1.1 server adds these by itself; they are not the protocol's.
        delete headers.connection;
        delete headers["keep-alive"];
        delete headers["transfer-encoding"];
        resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks), trailers: pick(res.trailers) });
      });
    });
    req.on("error", reject);
    req.end(ask.body);
  });
}

function envelope(flags: number, data: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + data.length);
  out[0] = flags;
  out.writeUInt32BE(data.length, 1);
  out.set(data, 5);
  return out;
}

/** The request of `message` on `wire` in `codec`, optionally gzipped (as a whole for Connect, per message otherwise). */
function ask<D extends DescMessage>(
  path: string,
  wire: Wire,
  codec: Codec,
  schema: D,
  message: MessageShape<D>,
  o: { user?: string; gzip?: boolean; acceptGzip?: boolean; extra?: Record<string, string> } = {},
): Ask {
  let data: Uint8Array = codec === "proto" ? toBinary(schema, message) : Buffer.from(toJsonString(schema, message));
  if (o.gzip) data = gzipSync(data);
  const headers: Record<string, string> = { "content-type": CONTENT_TYPE[wire][codec], ...o.extra };
  if (o.user) headers.authorization = basic(o.user);
  if (wire === "connect") {
    if (o.gzip) headers["content-encoding"] = "gzip";
    if (o.acceptGzip) headers["accept-encoding"] = "gzip";
    return { path, headers, body: data };
  }
  if (o.gzip) headers["grpc-encoding"] = "gzip";
  if (o.acceptGzip) headers["grpc-accept-encoding"] = "gzip";
  return { path, headers, body: envelope(o.gzip ? 1 : 0, data) };
}

describe("unary fast path against Connect-ES", function () {
  this.timeout(60_000);
  let fast: TestServer;
  let reference: TestServer;
  /** A session of the same user in each server, and the path of its GetSession. */
  const sessions = new Map<TestServer, string>();

  before(async () => {
    [fast, reference] = await Promise.all([
      // A small message limit: over it costs little to send, and an HTTP/2 client pushing tens of
      // megabytes at once is stopped by Node (ENHANCE_YOUR_CALM) on either path.
      startTestServer({ r: { startOnBoot: true }, limits: { maxBodyBytes: 1 << 20 } }),
      startTestServer({ r: { startOnBoot: true }, limits: { maxBodyBytes: 1 << 20 }, server: { unaryFastPath: false } }),
    ]);
    for (const s of [fast, reference]) {
      const res = await fetch(`${s.url}/r/sessions`, { method: "POST", headers: { authorization: basic("user") } });
      assert.equal(res.status, 201);
      sessions.set(s, ((await res.json()) as { id: string }).id);
    }
  });
  after(async () => {
    await Promise.all([fast?.stop(), reference?.stop()]);
  });

  /** Sends the same request to both servers (made per server: session ids differ) and compares the answers. */
  async function same(build: (s: TestServer) => Ask, h2 = true): Promise<Exchange> {
    const send = h2 ? exchangeH2 : exchangeH1;
    const [ours, theirs] = [await send(fast.port, build(fast)), await send(reference.port, build(reference))];
    // Bodies as text: a difference reads as one, not as a column of byte values.
    const shown = (e: Exchange) => ({ ...e, body: e.body.toString("latin1") });
    assert.deepEqual(shown(ours), shown(theirs));
    return ours;
  }

  const evalOf = (s: TestServer, script: string, accept = "application/json") =>
    create(EvalRequestSchema, {
      id: sessions.get(s)!,
      script: { contentType: "application/x-rscript", data: Buffer.from(script) },
      accept,
    });

  for (const wire of ["grpc", "grpc-web", "connect"] as const) {
    for (const codec of ["proto", "json"] as const) {
      const transports = wire === "grpc" ? [true] : [true, false];
      for (const h2 of transports) {
        const on = `${wire}+${codec} over ${h2 ? "HTTP/2" : "HTTP/1.1"}`;
        describe(on, () => {
          it("answers a public call (health Check) alike", async () => {
            const a = await same(
              () => ask("/grpc.health.v1.Health/Check", wire, codec, HealthCheckRequestSchema, create(HealthCheckRequestSchema)),
              h2,
            );
            assert.equal(a.status, 200);
          });

          it("answers an R evaluation alike", async () => {
            const a = await same(
              (s) => ask("/rock.r.v1.RService/Eval", wire, codec, EvalRequestSchema, evalOf(s, "1+1"), { user: "user" }),
              h2,
            );
            assert.equal(a.status, 200);
            assert.ok(a.body.includes(Buffer.from("application/json")), `no JSON answer in ${a.body.toString("latin1")}`);
          });

          it("answers refusals alike: no credentials, no such session, a role missing", async () => {
            const none = await same(
              (s) =>
                ask(
                  "/rock.r.v1.RService/GetSession",
                  wire,
                  codec,
                  GetSessionRequestSchema,
                  create(GetSessionRequestSchema, { id: sessions.get(s)! }),
                ),
              h2,
            );
            assert.equal(
              wire === "connect"
                ? none.status
                : Number((wire === "grpc" ? none.trailers : none.headers)["grpc-status"] ?? statusInBody(none.body)),
              wire === "connect" ? 401 : 16,
            );
            await same(
              () =>
                ask(
                  "/rock.r.v1.RService/GetSession",
                  wire,
                  codec,
                  GetSessionRequestSchema,
                  create(GetSessionRequestSchema, { id: "nope" }),
                  { user: "user" },
                ),
              h2,
            );
            await same(
              () =>
                ask("/rock.r.v1.RService/GetRServerStatus", wire, codec, GetSessionRequestSchema, create(GetSessionRequestSchema), {
                  user: "user",
                }),
              h2,
            );
          });

          it("answers an R error alike, its message readable verbatim", async () => {
            const text = "bad/path: 50% done, é";
            const a = await same(
              (s) =>
                ask("/rock.r.v1.RService/Eval", wire, codec, EvalRequestSchema, evalOf(s, `stop(${JSON.stringify(text)})`), {
                  user: "user",
                }),
              h2,
            );
            if (wire === "grpc") assert.match(a.trailers["grpc-message"] ?? "", /bad\/path: 50%25 done, %C3%A9$/);
          });

          it("compresses alike: a gzipped request, a gzipped answer past 1 KiB", async () => {
            const a = await same(
              (s) =>
                ask("/rock.r.v1.RService/Eval", wire, codec, EvalRequestSchema, evalOf(s, "strrep('x', 3000)"), {
                  user: "user",
                  gzip: true,
                  acceptGzip: true,
                }),
              h2,
            );
            assert.equal(a.status, 200);
            const payload = wire === "connect" ? a.body : a.body.subarray(5, 5 + a.body.readUInt32BE(1));
            if (wire !== "connect") assert.equal(a.body[0], 1, "the message is flagged compressed");
            // JSON carries the answer's bytes in base64.
            assert.ok(gunzipSync(payload).length > 3000);
          });

          it("refuses alike: a message over the size limit, an unknown encoding", async () => {
            const big = "x".repeat(fast.config.limits.maxBodyBytes + 10);
            await same((s) => ask("/rock.r.v1.RService/Eval", wire, codec, EvalRequestSchema, evalOf(s, big), { user: "user" }), h2);
            await same((s) => {
              const a = ask("/rock.r.v1.RService/Eval", wire, codec, EvalRequestSchema, evalOf(s, "1"), { user: "user" });
              return { ...a, headers: { ...a.headers, [wire === "connect" ? "content-encoding" : "grpc-encoding"]: "nope" } };
            }, h2);
          });

          if (codec === "proto") {
            it("refuses a message that does not decode with INVALID_ARGUMENT, alike", async () => {
              const junk = Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]);
              const a = await same(
                () => ({
                  path: "/rock.r.v1.RService/GetSession",
                  headers: { "content-type": CONTENT_TYPE[wire].proto, authorization: basic("user") },
                  body: wire === "connect" ? junk : envelope(0, junk),
                }),
                h2,
              );
              if (wire === "connect") assert.equal(a.status, 400);
              if (wire === "grpc") assert.equal(a.trailers["grpc-status"], "3");
            });
          }
        });
      }
    }
  }

  it("answers UNIMPLEMENTED, alike, to gRPC and gRPC-Web calls of a method that does not exist", async () => {
    for (const [wire, h2] of [
      ["grpc", true],
      ["grpc-web", true],
      ["grpc-web", false],
    ] as const) {
      const a = await same(
        () => ({
          path: "/rock.r.v1.RService/NoSuchThing",
          headers: { "content-type": CONTENT_TYPE[wire].proto },
          body: envelope(0, Buffer.alloc(0)),
        }),
        h2,
      );
      assert.equal(a.status, 200);
      assert.equal(wire === "grpc" ? a.trailers["grpc-status"] : statusInBody(a.body), "12");
    }
  });

  /** An Eval sent on a raw HTTP/2 stream, for what a grpc-js client hides (the server's own trailers, a reset). */
  function rawEval(
    script: string,
    extra: Record<string, string>,
  ): { stream: http2.ClientHttp2Stream; done: Promise<Exchange>; session: http2.ClientHttp2Session } {
    const session = http2.connect(`http://127.0.0.1:${fast.port}`);
    session.on("error", () => {});
    const a = ask("/rock.r.v1.RService/Eval", "grpc", "proto", EvalRequestSchema, evalOf(fast, script), { user: "user", extra });
    const stream = session.request({ ":method": "POST", ":path": a.path, te: "trailers", ...a.headers });
    const done = new Promise<Exchange>((resolve) => {
      let trailers: Record<string, string> = {};
      stream.on("trailers", (t) => (trailers = pick(t)));
      stream.on("error", () => {});
      stream.on("close", () => {
        session.close();
        resolve({ status: 0, headers: {}, body: Buffer.alloc(0), trailers });
      });
      stream.resume();
    });
    stream.end(a.body);
    return { stream, done, session };
  }

  /** `1+1` in the fast server's session, which answers at once only if nothing still runs in it. */
  async function answersAtOnce(): Promise<void> {
    const started = Date.now();
    const a = await exchangeH2(
      fast.port,
      ask("/rock.r.v1.RService/Eval", "grpc", "proto", EvalRequestSchema, evalOf(fast, "1+1"), { user: "user" }),
    );
    assert.equal(a.trailers["grpc-status"], "0");
    assert.ok(Date.now() - started < 3000, `the session answered after ${Date.now() - started} ms`);
  }

  it("answers DEADLINE_EXCEEDED itself when grpc-timeout passes, and interrupts R", async () => {
    const started = Date.now();
    const { done } = rawEval("Sys.sleep(30)", { "grpc-timeout": "400m" });
    const a = await done;
    assert.equal(a.trailers["grpc-status"], "4", JSON.stringify(a.trailers));
    assert.ok(Date.now() - started < 3000, `answered after ${Date.now() - started} ms`);
    await answersAtOnce();
  });

  it("interrupts R when the client resets the stream (RST_STREAM CANCEL)", async () => {
    const { stream, done } = rawEval("Sys.sleep(30)", {});
    await new Promise((r) => setTimeout(r, 400));
    stream.close(http2.constants.NGHTTP2_CANCEL);
    await done;
    await answersAtOnce();
  });

  it("takes a deadline too far for a Node timer as no deadline at all (not as one already passed)", async () => {
    const { done } = rawEval("1+1", { "grpc-timeout": "99999999H" });
    assert.equal((await done).trailers["grpc-status"], "0");
  });

  /** Execute over gRPC on the reference server (Connect-ES's path), with the deadline `timeout`. */
  const executeWithin = (script: string, timeout: string) =>
    exchangeH2(
      reference.port,
      ask(
        "/rock.r.v1.RService/Execute",
        "grpc",
        "proto",
        ExecuteRequestSchema,
        create(ExecuteRequestSchema, {
          id: sessions.get(reference)!,
          script: { contentType: "application/x-rscript", data: Buffer.from(script) },
        }),
        { user: "user", extra: { "grpc-timeout": timeout } },
      ),
    );

  it("takes such a deadline as none on Connect-ES's path too (a streaming call)", async () => {
    const a = await executeWithin("Sys.sleep(0.3); 1", "99999999H");
    assert.equal(a.trailers["grpc-status"], "0", a.trailers["grpc-message"]);
    const events = [];
    for (let at = 0; at < a.body.length; at += 5 + a.body.readUInt32BE(at + 1)) {
      events.push(fromBinary(ExecuteResponseSchema, a.body.subarray(at + 5, at + 5 + a.body.readUInt32BE(at + 1))).event);
    }
    assert.deepEqual(
      events.map((e) => e.case),
      ["json"],
      JSON.stringify(events),
    );
  });

  it("ends a stream whose deadline passed with DEADLINE_EXCEEDED, not as if it had completed", async () => {
    const a = await executeWithin("Sys.sleep(5); 1", "300m");
    assert.equal(a.trailers["grpc-status"], "4", a.trailers["grpc-message"]);
  });

  it("refuses a malformed grpc-timeout with INVALID_ARGUMENT", async () => {
    const a = await same((s) =>
      ask("/rock.r.v1.RService/Eval", "grpc", "proto", EvalRequestSchema, evalOf(s, "1"), {
        user: "user",
        extra: { "grpc-timeout": "soon" },
      }),
    );
    assert.equal(a.trailers["grpc-status"], "3");
  });

  it("gives grpc-js an error message verbatim (no %2F or %3A), on the fast path and on Connect-ES's", async () => {
    const text = "bad/path: 50% done, é";
    for (const s of [fast, reference]) {
      const clients: GrpcClients = grpcClients(s.port);
      try {
        const error = await call((cb) =>
          clients.r.eval(
            {
              id: sessions.get(s)!,
              script: { contentType: "application/x-rscript", data: Buffer.from(`stop(${JSON.stringify(text)})`), extensions: [] },
              accept: "",
              async: false,
            },
            metadataFor("user"),
            cb,
          ),
        ).then(
          () => undefined,
          (e: grpc.ServiceError) => e,
        );
        assert.ok(error, "the call failed");
        assert.ok(error.details.includes(text), `grpc-js read ${JSON.stringify(error.details)}`);
      } finally {
        clients.close();
      }
    }
  });
});

function statusInBody(body: Buffer): string | undefined {
  for (let at = 0; at + 5 <= body.length; at += 5 + body.readUInt32BE(at + 1)) {
    if (body[at]! & 0x80) return /grpc-status: (\d+)/.exec(body.subarray(at + 5, at + 5 + body.readUInt32BE(at + 1)).toString())?.[1];
  }
  return undefined;
}
