import { expect } from "chai";
import type * as grpcJs from "@grpc/grpc-js";
import { Code, ConnectError } from "@connectrpc/connect";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { NetworkService } from "../../gen/es/rock/networks/v1/networks_pb.js";
import type { GetInfoResponse, UploadFileResponse } from "../../gen/grpc-js/rock/r/v1/rservice.js";
import type { GetNetworkResponse } from "../../gen/grpc-js/rock/networks/v1/networks.js";
import { call, connectClient, metadataFor, rest, serveWithClients } from "../support/clients.js";

/** The decisions of reference-behaviour.md §3, each over REST and over gRPC (grpc-js, Connect-ES). */

const RSCRIPT = { "content-type": "application/x-rscript" };
const INVALID_ARGUMENT = 3;
const UNAUTHENTICATED = 16;

/** How a grpc-js call ended: its code (0: OK) and message. */
function outcome(start: (cb: (err: grpcJs.ServiceError | null) => void) => unknown): Promise<{ code: number; details: string }> {
  return new Promise((resolve) => start((err) => resolve({ code: err?.code ?? 0, details: err?.details ?? "" })));
}

/** How a grpc-js server stream ended. */
function streamOutcome<T>(stream: grpcJs.ClientReadableStream<T>): Promise<{ code: number; details: string }> {
  return new Promise((resolve) => {
    stream.on("data", () => {});
    stream.on("error", (err: grpcJs.ServiceError) => resolve({ code: err.code, details: err.details }));
    stream.on("end", () => resolve({ code: 0, details: "" }));
  });
}

async function connectCode(run: () => Promise<unknown>): Promise<{ code: Code | undefined; message: string }> {
  try {
    await run();
    return { code: undefined, message: "" };
  } catch (e) {
    const ce = ConnectError.from(e);
    return { code: ce.code, message: ce.rawMessage };
  }
}

describe("wire decisions (reference-behaviour §3)", function () {
  this.timeout(120_000);
  const served = serveWithClients({ node: { id: "wire-1", name: "Wire node", cluster: "c", tags: ["t"] }, r: { startOnBoot: true } });
  const url = () => served.server.url;

  async function newSession(): Promise<string> {
    const res = await rest(url(), "POST", "/r/sessions", { user: "user", headers: { "content-type": "application/json" } });
    expect(res.status, res.text).to.equal(201);
    return res.json<{ id: string }>().id;
  }

  describe("an empty or blank script", () => {
    it("_eval, _assign and _execute answer 400 'script is required' over REST, sync and async", async () => {
      const id = await newSession();
      const paths = ["_eval", "_eval?async=true", "_assign?s=x", "_assign?s=x&async=true", "_execute"].map((p) => `/r/session/${id}/${p}`);
      for (const body of ["", "  \n\t\r\n "]) {
        for (const path of paths) {
          const res = await rest(url(), "POST", path, { user: "user", body, headers: RSCRIPT });
          expect(res.status, `${path} ${JSON.stringify(body)}: ${res.text}`).to.equal(400);
          expect(res.json<{ message: string }>().message).to.equal("script is required");
        }
      }
      const rdata = await rest(url(), "POST", `/r/session/${id}/_assign?s=x`, {
        user: "user",
        body: "",
        headers: { "content-type": "application/x-rdata" },
      });
      expect(rdata.status, rdata.text).to.equal(400);
      const fine = await rest(url(), "POST", `/r/session/${id}/_eval`, { user: "user", body: " 1 + 1 ", headers: RSCRIPT });
      expect(fine.text).to.equal("2");
    });

    it("is INVALID_ARGUMENT over gRPC and Connect, for Eval, Assign and Execute", async () => {
      const id = await newSession();
      const blank = { contentType: "application/x-rscript", data: Buffer.from(" \n"), extensions: [] };
      const r = served.clients.r;
      const md = metadataFor("user");
      expect(await outcome((cb) => r.eval({ id, async: false, script: blank, accept: "" }, md, cb))).to.deep.equal({
        code: INVALID_ARGUMENT,
        details: "script is required",
      });
      expect(await outcome((cb) => r.assign({ id, symbol: "x", async: false, body: blank }, md, cb))).to.deep.equal({
        code: INVALID_ARGUMENT,
        details: "script is required",
      });
      expect(await streamOutcome(r.execute({ id, script: blank, accept: "" }, md))).to.deep.equal({
        code: INVALID_ARGUMENT,
        details: "script is required",
      });
      const connect = connectClient(RService, served.server.port, "connect", "user");
      expect(
        await connectCode(() => connect.eval({ id, script: { contentType: "application/x-rscript", data: new Uint8Array() } })),
      ).to.deep.equal({
        code: Code.InvalidArgument,
        message: "script is required",
      });
    });
  });

  describe("_download without a path", () => {
    it("answers 400 'path is required' over REST and INVALID_ARGUMENT over gRPC", async () => {
      const id = await newSession();
      for (const path of [`/r/session/${id}/_download`, `/r/session/${id}/_download?path=`, `/r/session/${id}/_download?temp=true`]) {
        const res = await rest(url(), "GET", path, { user: "user" });
        expect(res.status, `${path}: ${res.text}`).to.equal(400);
        expect(res.json<{ message: string }>().message).to.equal("path is required");
      }
      const stream = served.clients.r.downloadFile({ id, path: "", temp: false }, metadataFor("user"));
      expect(await streamOutcome(stream)).to.deep.equal({ code: INVALID_ARGUMENT, details: "path is required" });
    });
  });

  describe("the size of an upload", () => {
    it("is a JSON number over REST and a number over gRPC", async () => {
      const id = await newSession();
      const boundary = "----wire";
      const body = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nhello\r\n--${boundary}--\r\n`;
      const res = await rest(url(), "POST", `/r/session/${id}/_upload`, {
        user: "user",
        body,
        headers: { "content-type": `multipart/form-data; boundary=${boundary}` },
      });
      expect(res.status, res.text).to.equal(200);
      expect(res.text).to.equal('{"path":"a.txt","size":5}');
      const answer = await new Promise<UploadFileResponse>((resolve, reject) => {
        const upload = served.clients.r.uploadFile(metadataFor("user"), (err: grpcJs.ServiceError | null, r?: UploadFileResponse) =>
          err ? reject(err) : resolve(r!),
        );
        upload.write({
          id,
          path: "b.txt",
          chunk: { contentType: "application/octet-stream", data: Buffer.from("hello!"), extensions: [] },
        });
        upload.end();
      });
      expect(answer).to.deep.include({ path: "b.txt", size: 6 });
    });
  });

  describe("/_info", () => {
    it("carries the configured name beside id, type, cluster and tags, and the sessions' network, over REST and gRPC", async () => {
      const res = await rest(url(), "GET", "/_info");
      expect(res.json()).to.deep.equal({
        id: "wire-1",
        name: "Wire node",
        type: "rock",
        cluster: "c",
        tags: ["t"],
        sessionNetwork: "host",
      });
      const info = await call<GetInfoResponse>((cb) => served.clients.r.getInfo({}, metadataFor(), cb));
      expect(info).to.deep.include({ id: "wire-1", name: "Wire node", sessionNetwork: "host" });
    });
  });

  describe("a share key", () => {
    let id: string;
    let key: string;
    before(async () => {
      const created = await rest(url(), "POST", "/ws/draft/networks", {
        user: "editor",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ id: "shared", name: [{ lang: "en", value: "Shared" }] }),
      });
      expect(created.status, created.text).to.equal(201);
      id = "shared";
      const res = await rest(url(), "PUT", `/ws/draft/network/${id}/_share_key?expire=2999-12-31`, { user: "editor" });
      expect(res.status, res.text).to.equal(200);
      key = res.text;
    });

    it("lets a caller without credentials read that draft over REST, view only", async () => {
      const res = await rest(url(), "GET", `/ws/draft/network/${id}?key=${encodeURIComponent(key)}`);
      expect(res.status, res.text).to.equal(200);
      const body = res.json<{ id: string; "vendor.catalog.EntityStateDto.state": { permissions: Record<string, boolean> } }>();
      expect(body.id).to.equal(id);
      expect(body["vendor.catalog.EntityStateDto.state"].permissions).to.deep.equal({
        view: true,
        edit: false,
        delete: false,
        publish: false,
      });
    });

    it("without a valid key an anonymous caller is asked to authenticate (401), and wrong credentials are not anonymous", async () => {
      for (const q of ["", `?key=${encodeURIComponent(`${key.slice(0, -2)}xx`)}`]) {
        const res = await rest(url(), "GET", `/ws/draft/network/${id}${q}`);
        expect(res.status, res.text).to.equal(401);
        expect(res.headers.get("www-authenticate")).to.match(/^Basic realm=/);
      }
      const wrong = await rest(url(), "GET", `/ws/draft/network/${id}?key=${encodeURIComponent(key)}`, {
        user: "editor",
        password: "wrong",
      });
      expect(wrong.status).to.equal(401);
      const model = await rest(url(), "GET", `/ws/draft/network/${id}/model?key=${encodeURIComponent(key)}`);
      expect(model.status, "the key opens the document, not other RPCs").to.equal(401);
      const missing = await rest(url(), "GET", `/ws/draft/network/other?key=${encodeURIComponent(key)}`);
      expect(missing.status, "another id").to.equal(401);
    });

    it("works the same over gRPC and Connect", async () => {
      const res = await call<GetNetworkResponse>((cb) => served.clients.networks.getNetwork({ id, key }, metadataFor(), cb));
      expect(res.network?.id).to.equal(id);
      expect(await outcome((cb) => served.clients.networks.getNetwork({ id }, metadataFor(), cb))).to.deep.include({
        code: UNAUTHENTICATED,
      });
      const connect = connectClient(NetworkService, served.server.port, "connect");
      expect((await connect.getNetwork({ id, key })).network?.id).to.equal(id);
    });
  });
});
