import { expect } from "chai";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import fs from "node:fs";
import * as grpcJs from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import os from "node:os";
import path from "node:path";
import { NetworkService } from "../../gen/es/rock/networks/v1/networks_pb.js";
import { HealthCheckResponse_ServingStatus } from "../../gen/es/grpc/health/v1/health_pb.js";
import {
  HealthCheckResponse_ServingStatus as GrpcJsServingStatus,
  type HealthCheckResponse,
} from "../../gen/grpc-js/grpc/health/v1/health.js";
import type { GetNetworkResponse } from "../../gen/grpc-js/rock/networks/v1/networks.js";
import { startTestServer, basic, type TestServer } from "../support/server.js";
import { rest, grpcClients, metadataFor, call, connectClient, type ConnectProtocol } from "../support/clients.js";
import { Health } from "../../src/server/health.js";

const BUF = path.resolve("node_modules/.bin/buf");
const execBuf = promisify(execFile);

describe("one port, every protocol", () => {
  let server: TestServer;
  let grpc: ReturnType<typeof grpcClients>;
  /** buf keeps a cache; tests keep it in a temporary folder. */
  let bufCache: string;
  const run = (file: string, args: string[]) => execBuf(file, args, { env: { ...process.env, BUF_CACHE_DIR: bufCache } });

  before(async () => {
    bufCache = fs.mkdtempSync(path.join(os.tmpdir(), "rock-buf-"));
    server = await startTestServer();
    grpc = grpcClients(server.port);
    const created = await rest(server.url, "POST", "/ws/draft/networks", {
      user: "cadmin",
      password: "cadmin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: [{ lang: "en", value: "Proto Net" }], acronym: [{ lang: "en", value: "PN" }] }),
    });
    expect(created.status).to.equal(201);
  });
  after(async () => {
    grpc.close();
    await server.stop();
    fs.rmSync(bufCache, { recursive: true, force: true });
  });

  it("answers REST/JSON", async () => {
    const res = await rest(server.url, "GET", "/ws/draft/network/pn", { user: "editor" });
    expect(res.status).to.equal(200);
    expect(res.headers.get("content-type")).to.equal("application/json");
    expect(res.json<{ id: string }>().id).to.equal("pn");
  });

  it("answers a @grpc/grpc-js client built from the ts-proto stubs (h2c)", async () => {
    const res = await call<GetNetworkResponse>((cb) => grpc.networks.getNetwork({ id: "pn" }, metadataFor("editor"), cb));
    expect(res.network?.id).to.equal("pn");
    expect(res.network?.acronym[0]?.value).to.equal("PN");
  });

  for (const protocol of ["connect", "grpc-web", "grpc"] as ConnectProtocol[]) {
    it(`answers a Connect-ES client over ${protocol}`, async () => {
      const client = connectClient(NetworkService, server.port, protocol, "editor");
      const res = await client.getNetwork({ id: "pn" });
      expect(res.network?.name[0]?.value).to.equal("Proto Net");
    });
  }

  it("answers a grpc-js client loaded at run time from the .proto files (@grpc/proto-loader)", async () => {
    const definition = await protoLoader.load("rock/networks/v1/networks.proto", {
      includeDirs: [path.resolve("proto"), path.resolve(".protodeps")],
      keepCase: false,
      defaults: true,
    });
    const Service = serviceAt(grpcJs.loadPackageDefinition(definition), "rock.networks.v1.NetworkService");
    const client = new Service(`127.0.0.1:${server.port}`, grpcJs.credentials.createInsecure());
    try {
      const res = await new Promise<{ network: { id: string } }>((resolve, reject) =>
        client.getNetwork!({ id: "pn" }, metadataFor("editor"), (err: grpcJs.ServiceError | null, r: { network: { id: string } }) =>
          err ? reject(err) : resolve(r),
        ),
      );
      expect(res.network.id).to.equal("pn");
    } finally {
      client.close();
    }
  });

  it("maps errors to the same codes in every protocol", async () => {
    const res = await rest(server.url, "GET", "/ws/draft/network/nope", { user: "editor" });
    expect(res.status).to.equal(404);
    const err = await call<GetNetworkResponse>((cb) => grpc.networks.getNetwork({ id: "nope" }, metadataFor("editor"), cb)).catch(
      (e: { code: number }) => e,
    );
    expect((err as { code: number }).code).to.equal(5);
    const connectErr = await connectClient(NetworkService, server.port, "connect", "editor")
      .getNetwork({ id: "nope" })
      .catch((e: { code: number }) => e);
    expect((connectErr as { code: number }).code).to.equal(5);
  });

  it("serves grpc.health.v1 to grpc-js and Connect clients", async () => {
    const res = await call<HealthCheckResponse>((cb) => grpc.health.check({ service: "" }, metadataFor(), cb));
    expect(res.status).to.equal(GrpcJsServingStatus.SERVING);
    const named = await connectClient(Health, server.port, "grpc").check({ service: "rock.networks.v1.NetworkService" });
    expect(named.status).to.equal(HealthCheckResponse_ServingStatus.SERVING);
    const unknown = await connectClient(Health, server.port, "grpc")
      .check({ service: "no.Such" })
      .catch((e: { code: number }) => e);
    expect((unknown as { code: number }).code).to.equal(5);
  });

  it("lets buf curl list the services through reflection", async function () {
    this.timeout(60_000);
    const { stdout } = await run(BUF, ["curl", "--http2-prior-knowledge", "--list-services", server.url]);
    const services = stdout.trim().split("\n");
    expect(services).to.include.members([
      "rock.r.v1.RService",
      "rock.networks.v1.NetworkService",
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
    ]);
  });

  it("lets buf curl call an RPC by name with no schema file", async function () {
    this.timeout(60_000);
    const { stdout } = await run(BUF, [
      "curl",
      "--http2-prior-knowledge",
      "-H",
      `authorization: ${basic("editor")}`,
      "-d",
      '{"id":"pn"}',
      `${server.url}/rock.networks.v1.NetworkService/GetNetwork`,
    ]);
    const answer = JSON.parse(stdout) as { network: { id: string; acronym: { value: string }[] } };
    expect(answer.network.id).to.equal("pn");
    expect(answer.network.acronym[0]!.value).to.equal("PN");
  });

  it("lets buf curl describe methods through reflection v1alpha too", async function () {
    this.timeout(60_000);
    const { stdout } = await run(BUF, [
      "curl",
      "--http2-prior-knowledge",
      "--reflect-protocol",
      "grpc-v1alpha",
      "--list-methods",
      server.url,
    ]);
    expect(stdout).to.include("rock.r.v1.RService/Eval");
    expect(stdout).to.include("rock.networks.v1.NetworkService/ListNetworks");
  });
});

/** The client class of the service at `name` (`pkg.Service`) in what grpc-js loaded from the .proto files. */
function serviceAt(loaded: grpcJs.GrpcObject, name: string): grpcJs.ServiceClientConstructor {
  let node: grpcJs.GrpcObject[string] = loaded;
  for (const part of name.split(".")) {
    if (typeof node === "function" || isTypeDefinition(node)) throw new Error(`${name}: no package before '${part}'`);
    const next: grpcJs.GrpcObject[string] | undefined = node[part];
    if (next === undefined) throw new Error(`${name}: no '${part}'`);
    node = next;
  }
  if (typeof node !== "function") throw new Error(`${name} is no service`);
  return node;
}

function isTypeDefinition(node: grpcJs.GrpcObject | grpcJs.ProtobufTypeDefinition): node is grpcJs.ProtobufTypeDefinition {
  return typeof node.format === "string";
}
