/**
 * The one error model: every kind of fault with its HTTP status, gRPC code and REST body, asserted on
 * the mapping itself and, for a condition of each kind that a real server can be brought to cheaply,
 * end to end over REST (plain HTTP) and gRPC (@grpc/grpc-js).
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor, type StreamResponse } from "@connectrpc/connect";
import { ExecuteResponseSchema, RService, type ExecuteResponse } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { toRestError } from "../../src/transport/protocols/rest/errors.js";
import { Fault, type FaultKind } from "../../src/errors/fault.js";
import { FAULT_ANSWERS, faultError } from "../../src/errors/mapping.js";
import { faultConversion } from "../../src/interceptors/faults.js";
import { call, metadataFor, rest, serveWithClients, type RestAnswer } from "../support/clients.js";

/** kind → HTTP status, gRPC code, the REST `key`: written out, not derived, so that a change shows. */
const TABLE: readonly (readonly [FaultKind, number, Code, string])[] = [
  ["invalid", 400, Code.InvalidArgument, "invalid_argument"],
  ["unsupported_media", 415, Code.InvalidArgument, "invalid_argument"],
  ["precondition", 400, Code.FailedPrecondition, "failed_precondition"],
  ["unauthenticated", 401, Code.Unauthenticated, "unauthenticated"],
  ["forbidden", 403, Code.PermissionDenied, "permission_denied"],
  ["not_found", 404, Code.NotFound, "not_found"],
  ["conflict", 409, Code.AlreadyExists, "already_exists"],
  ["too_large", 413, Code.ResourceExhausted, "resource_exhausted"],
  ["limit", 429, Code.ResourceExhausted, "resource_exhausted"],
  ["canceled", 499, Code.Canceled, "canceled"],
  ["internal", 500, Code.Internal, "internal"],
  ["unavailable", 503, Code.Unavailable, "unavailable"],
  ["deadline", 504, Code.DeadlineExceeded, "deadline_exceeded"],
];

const ignoreInternal = (): void => expect.fail("a fault is not an internal error");

describe("error table: the mapping", () => {
  it("has a row for every kind", () => {
    expect(Object.keys(FAULT_ANSWERS).sort()).to.deep.equal(TABLE.map(([kind]) => kind).sort());
  });

  for (const [kind, status, code, key] of TABLE) {
    it(`${kind}: HTTP ${status}, gRPC ${Code[code]}, body {status, key: ${key}, args, message}`, () => {
      expect(FAULT_ANSWERS[kind]).to.deep.equal({ code, status });
      const fault = new Fault(kind, `a ${kind} fault`);
      const converted = faultError(fault);
      expect(converted.code).to.equal(code);
      expect(converted.rawMessage).to.equal(`a ${kind} fault`);
      expect(converted.cause).to.equal(fault);
      expect([...converted.metadata.keys()], "no REST hints in gRPC metadata").to.deep.equal([]);
      for (const err of [fault, converted]) {
        const e = toRestError(err, ignoreInternal);
        expect(e.status).to.equal(status);
        expect(e.headers).to.deep.equal({ "content-type": "application/json" });
        expect(JSON.parse(e.body)).to.deep.equal({ status: String(status), key, args: [], message: `a ${kind} fault` });
      }
    });
  }

  it("carries Retry-After as metadata to every protocol; a REST body and a challenge to REST only", () => {
    const later = faultError(new Fault("unavailable", "come back", { retryAfterSeconds: 7 }));
    expect(later.metadata.get("retry-after")).to.equal("7");
    expect(toRestError(later, ignoreInternal).headers["retry-after"]).to.equal("7");

    const conflict = new Fault("conflict", "in use", { body: { network: ["a", "b"] } });
    expect([...faultError(conflict).metadata.keys()]).to.deep.equal([]);
    expect(toRestError(conflict, ignoreInternal)).to.deep.equal({
      status: 409,
      headers: { "content-type": "application/json" },
      body: '{"network":["a","b"]}',
    });

    const who = new Fault("unauthenticated", "who?", { challenge: 'Basic realm="x"' });
    expect([...faultError(who).metadata.keys()]).to.deep.equal([]);
    expect(toRestError(faultError(who), ignoreInternal).headers["www-authenticate"]).to.equal('Basic realm="x"');
  });

  it("answers an error that is neither a fault nor a ConnectError 500 without its text, and reports it", () => {
    const reported: unknown[] = [];
    const bug = new Error("secret detail");
    const e = toRestError(bug, (err) => reported.push(err));
    expect(e.status).to.equal(500);
    expect(JSON.parse(e.body)).to.deep.equal({ status: "500", key: "internal", args: [], message: "Internal error" });
    expect(reported).to.deep.equal([bug]);
  });

  it("reads a ConnectError that is not a fault by its code's usual status", () => {
    const e = toRestError(new ConnectError("nope", Code.Unimplemented), ignoreInternal);
    expect(e.status).to.equal(501);
    expect(JSON.parse(e.body)).to.deep.include({ status: "501", key: "unimplemented", message: "nope" });
  });
});

describe("error table: the conversion interceptor", () => {
  /** Runs `faultConversion` over a handler answering `answer`, or failing with `failure`. */
  async function through(answer: () => Promise<StreamResponse>): Promise<StreamResponse> {
    const next: Parameters<Interceptor>[0] = answer;
    const res = await faultConversion(next)({} as never);
    if (!res.stream) throw new Error("a unary answer to a stream");
    return res;
  }

  /** A stream of `messages`, as an Execute handler answers it. */
  function streamOf(messages: AsyncIterable<ExecuteResponse>): StreamResponse {
    return {
      stream: true,
      service: RService,
      method: RService.method.execute,
      header: new Headers(),
      trailer: new Headers(),
      message: messages,
    };
  }

  const line = create(ExecuteResponseSchema, { event: { case: "output", value: "[1] 1" } });

  it("converts a fault the handler raises", async () => {
    const refused = await through(() => Promise.reject(new Fault("forbidden", "not yours"))).catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(ConnectError);
    expect((refused as ConnectError).code).to.equal(Code.PermissionDenied);
    expect((refused as ConnectError).cause).to.be.instanceOf(Fault);
  });

  it("converts a fault raised mid-stream, after messages went out, and leaves other errors alone", async () => {
    for (const [failure, expected] of [
      [new Fault("internal", "R session has ended"), Code.Internal],
      [new ConnectError("gone", Code.Canceled), Code.Canceled],
    ] as const) {
      const res = await through(async () =>
        streamOf(
          (async function* () {
            yield line;
            throw failure;
          })(),
        ),
      );
      const seen: unknown[] = [];
      const error = await (async () => {
        for await (const m of res.message) seen.push(m);
      })().catch((e: unknown) => e);
      expect(seen).to.deep.equal([line]);
      expect((error as ConnectError).code).to.equal(expected);
      expect((error as ConnectError).rawMessage).to.equal(failure instanceof Fault ? failure.message : failure.rawMessage);
    }
  });

  it("passes a reader's return() on to the stream, also before its first message", async () => {
    let returned = 0;
    const source: AsyncIterable<ExecuteResponse> = {
      [Symbol.asyncIterator]: () => ({
        next: async () => ({ done: false, value: line }),
        return: async () => {
          returned++;
          return { done: true, value: undefined };
        },
      }),
    };
    const res = await through(async () => streamOf(source));
    await res.message[Symbol.asyncIterator]().return?.();
    expect(returned).to.equal(1);
  });
});

describe("error table: end to end, REST and gRPC", function () {
  this.timeout(60_000);
  const MAX_BODY = 2048;
  const MAX_UPLOAD = 64;
  const dir = mkdtempSync(join(tmpdir(), "rock-error-table-"));
  // R takes a while to start: long enough to be found starting.
  const profile = join(dir, "slow-start.R");
  writeFileSync(profile, "Sys.sleep(3)\n");
  chmodSync(profile, 0o644);
  const served = serveWithClients({
    r: { startOnBoot: false, startWaitSeconds: 0, profile, spareSessions: 0, maxSessionsPerUser: 1 },
    limits: { maxBodyBytes: MAX_BODY, maxUploadBytes: MAX_UPLOAD },
    packages: { gitHost: "relative/dir" },
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const url = (): string => served.server.url;

  /** The REST answer has the status and the usual body, its message verbatim. */
  function expectRest(res: RestAnswer, status: number, key: string, message: string): void {
    expect(res.status, res.text).to.equal(status);
    expect(res.headers.get("content-type")).to.equal("application/json");
    expect(res.json()).to.deep.equal({ status: String(status), key, args: [], message });
  }

  /** The grpc-js error of a unary call. */
  function grpcError(start: (cb: (err: grpc.ServiceError | null, res: unknown) => void) => unknown): Promise<grpc.ServiceError> {
    return call<unknown>(start).then(
      () => expect.fail("expected the call to fail"),
      (e: grpc.ServiceError) => e,
    );
  }

  async function expectGrpc(
    start: (cb: (err: grpc.ServiceError | null, res: unknown) => void) => unknown,
    code: grpc.status,
    message: string,
  ): Promise<grpc.ServiceError> {
    const e = await grpcError(start);
    expect(e.code, e.details).to.equal(code);
    expect(e.details).to.equal(message);
    return e;
  }

  /** A network as REST takes it. */
  const network = (id: string, networkIds: string[] = []) => JSON.stringify({ id, name: [{ lang: "en", value: id }], networkIds });

  it("invalid: 400, INVALID_ARGUMENT", async () => {
    expectRest(
      await rest(url(), "GET", "/ws/draft/networks?limit=-1", { user: "cadmin" }),
      400,
      "invalid_argument",
      "limit must not be negative",
    );
    await expectGrpc(
      (cb) => served.clients.networks.listNetworks({ limit: -1, exclude: [] }, metadataFor("cadmin"), cb),
      grpc.status.INVALID_ARGUMENT,
      "limit must not be negative",
    );
  });

  it("unsupported_media (REST only, where the edge reads the body): 415", async () => {
    const res = await rest(url(), "POST", "/ws/draft/networks", { user: "cadmin", body: "{}", headers: { "content-type": "text/plain" } });
    expectRest(res, 415, "invalid_argument", "Content-Type must be application/json for this body (given: 'text/plain')");
  });

  it("precondition: 400, FAILED_PRECONDITION", async () => {
    const message = "The git host is not a URL or an absolute path: 'relative/dir'";
    expectRest(
      await rest(url(), "POST", "/rserver/packages?name=dsBase&manager=git", { user: "admin" }),
      400,
      "failed_precondition",
      message,
    );
    await expectGrpc(
      (cb) => served.clients.r.installPackage({ name: "dsBase", manager: "git", ref: "" }, metadataFor("admin"), cb),
      grpc.status.FAILED_PRECONDITION,
      message,
    );
  });

  it("unauthenticated: 401 with WWW-Authenticate, UNAUTHENTICATED", async () => {
    const res = await rest(url(), "GET", "/r/sessions");
    expectRest(res, 401, "unauthenticated", "Authentication required");
    expect(res.headers.get("www-authenticate")).to.equal('Basic realm="rock"');
    const wrong = await rest(url(), "GET", "/r/sessions", { user: "user", password: "wrong" });
    expectRest(wrong, 401, "unauthenticated", "Bad credentials");
    expect(wrong.headers.get("www-authenticate")).to.equal('Basic realm="rock"');
    const e = await expectGrpc(
      (cb) => served.clients.r.listSessions({}, metadataFor(), cb),
      grpc.status.UNAUTHENTICATED,
      "Authentication required",
    );
    expect(e.metadata.get("www-authenticate"), "the challenge is HTTP's, not gRPC's").to.deep.equal([]);
  });

  it("forbidden: 403, PERMISSION_DENIED", async () => {
    const message = "DeleteSessions requires one of the roles: administrator, manager";
    expectRest(await rest(url(), "DELETE", "/r/sessions", { user: "user" }), 403, "permission_denied", message);
    await expectGrpc((cb) => served.clients.r.deleteSessions({}, metadataFor("user"), cb), grpc.status.PERMISSION_DENIED, message);
  });

  it("not_found: 404, NOT_FOUND", async () => {
    expectRest(await rest(url(), "GET", "/ws/draft/network/nope", { user: "cadmin" }), 404, "not_found", "No such network: nope");
    await expectGrpc(
      (cb) => served.clients.networks.getNetwork({ id: "nope" }, metadataFor("cadmin"), cb),
      grpc.status.NOT_FOUND,
      "No such network: nope",
    );
  });

  it("conflict: 409 with the body the fault carries, ALREADY_EXISTS with its message", async () => {
    for (const n of [network("inner"), network("outer", ["inner"])]) {
      const created = await rest(url(), "POST", "/ws/draft/networks", {
        user: "cadmin",
        body: n,
        headers: { "content-type": "application/json" },
      });
      expect(created.status, created.text).to.equal(201);
    }
    const res = await rest(url(), "DELETE", "/ws/draft/network/inner", { user: "cadmin" });
    expect(res.status, res.text).to.equal(409);
    expect(res.headers.get("content-type")).to.equal("application/json");
    expect(res.json()).to.deep.equal({ network: ["outer"] });
    await expectGrpc(
      (cb) => served.clients.networks.deleteNetwork({ id: "inner" }, metadataFor("cadmin"), cb),
      grpc.status.ALREADY_EXISTS,
      "Network inner is included in: outer",
    );
  });

  it("too_large (a body over limits.maxBodyBytes, at the edge): 413", async () => {
    const body = JSON.stringify({ name: [{ lang: "en", value: "big" }], content: "x".repeat(MAX_BODY) });
    const res = await rest(url(), "POST", "/ws/draft/networks", { user: "cadmin", body, headers: { "content-type": "application/json" } });
    expectRest(res, 413, "resource_exhausted", `Request body exceeds the limit of ${MAX_BODY} bytes`);
  });

  // R is stopped, then found starting, then running: these three run in this order.
  it("internal (R is not running): 500, INTERNAL", async () => {
    expectRest(await rest(url(), "POST", "/r/sessions", { user: "user" }), 500, "internal", "R server is not running");
    await expectGrpc((cb) => served.clients.r.createSession({}, metadataFor("user"), cb), grpc.status.INTERNAL, "R server is not running");
  });

  it("unavailable (R is starting): 503 with Retry-After, UNAVAILABLE with retry-after", async () => {
    const starting = rest(url(), "PUT", "/rserver", { user: "admin" });
    const message = "R server is starting; retry in 5 s";
    let res = await rest(url(), "POST", "/r/sessions", { user: "user" });
    for (const end = Date.now() + 2_000; res.status === 500 && Date.now() < end; )
      res = await rest(url(), "POST", "/r/sessions", { user: "user" });
    expectRest(res, 503, "unavailable", message);
    expect(res.headers.get("retry-after")).to.equal("5");
    const e = await expectGrpc((cb) => served.clients.r.createSession({}, metadataFor("user"), cb), grpc.status.UNAVAILABLE, message);
    expect(e.metadata.get("retry-after")).to.deep.equal(["5"]);
    expect((await starting).status).to.equal(200);
  });

  it("limit (sessions per user) 429, too_large (an upload over limits.maxUploadBytes) 413: RESOURCE_EXHAUSTED both", async () => {
    const created = await rest(url(), "POST", "/r/sessions", { user: "user" });
    expect(created.status, created.text).to.equal(201);
    const id = created.json<{ id: string }>().id;
    const tooMany = "Too many R sessions: user has 1 open sessions, the limit per user is 1; close one first";
    expectRest(await rest(url(), "POST", "/r/sessions", { user: "user" }), 429, "resource_exhausted", tooMany);
    await expectGrpc((cb) => served.clients.r.createSession({}, metadataFor("user"), cb), grpc.status.RESOURCE_EXHAUSTED, tooMany);

    const tooLarge = `Upload exceeds the limit of ${MAX_UPLOAD} bytes`;
    const data = Buffer.alloc(MAX_UPLOAD + 1, 1);
    const upload = await rest(url(), "POST", `/r/session/${id}/_upload?path=big.bin`, {
      user: "user",
      body: data,
      headers: { "content-type": "application/octet-stream" },
    });
    expectRest(upload, 413, "resource_exhausted", tooLarge);
    const e = await new Promise<grpc.ServiceError | null>((resolve) => {
      const stream = served.clients.r.uploadFile(metadataFor("user"), (err) => resolve(err));
      stream.write({ id, path: "big.bin" });
      stream.write({ id: "", chunk: { contentType: "application/octet-stream", data, extensions: [] } });
      stream.end();
    });
    expect(e?.code, e?.details).to.equal(grpc.status.RESOURCE_EXHAUSTED);
    expect(e?.details).to.equal(tooLarge);
    expect((await rest(url(), "DELETE", `/r/session/${id}`, { user: "user" })).status).to.equal(204);
  });
});
