import * as grpc from "@grpc/grpc-js";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport, createGrpcTransport } from "@connectrpc/connect-node";
import type { DescService } from "@bufbuild/protobuf";
import { RServiceClient } from "../../gen/grpc-js/rock/r/v1/rservice.js";
import { NetworkServiceClient } from "../../gen/grpc-js/rock/networks/v1/networks.js";
import { HealthClient } from "../../gen/grpc-js/grpc/health/v1/health.js";
import { basic, startTestServer, type ConfigPatch, type TestServer } from "./server.js";

export interface RestAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly bytes: Buffer;
  json<T = unknown>(): T;
}

export interface RestOptions {
  readonly user?: string;
  readonly password?: string;
  readonly body?: string | Uint8Array;
  readonly headers?: Record<string, string>;
}

/** Plain HTTP/1.1 over a real socket (Node's fetch). */
export async function rest(baseUrl: string, method: string, path: string, o: RestOptions = {}): Promise<RestAnswer> {
  const headers: Record<string, string> = { ...o.headers };
  if (o.user) headers.authorization = basic(o.user, o.password);
  const res = await fetch(baseUrl + path, { method, headers, body: o.body as BodyInit | undefined });
  const bytes = Buffer.from(await res.arrayBuffer());
  const text = bytes.toString("utf8");
  return { status: res.status, headers: res.headers, text, bytes, json: <T>() => JSON.parse(text) as T };
}

/** @grpc/grpc-js clients built from the ts-proto stubs; over TLS trusting `ca` when given, else h2c. */
export function grpcClients(port: number, ca?: Buffer) {
  const address = `127.0.0.1:${port}`;
  const creds = ca ? grpc.credentials.createSsl(ca) : grpc.credentials.createInsecure();
  // Otherwise grpc-js sends the IP address as TLS server name, which RFC 6066 forbids (Node warns);
  // the test certificates name localhost too.
  const options: grpc.ChannelOptions = ca ? { "grpc.ssl_target_name_override": "localhost" } : {};
  const clients = {
    r: new RServiceClient(address, creds, options),
    networks: new NetworkServiceClient(address, creds, options),
    health: new HealthClient(address, creds, options),
  };
  return {
    ...clients,
    close: () => {
      for (const c of Object.values(clients)) c.close();
    },
  };
}

export function metadataFor(user?: string, password?: string): grpc.Metadata {
  const md = new grpc.Metadata();
  if (user) md.set("authorization", basic(user, password));
  return md;
}

export type GrpcClients = ReturnType<typeof grpcClients>;

/** A test server with grpc-js clients for a describe block: started before its tests, stopped after. */
export function serveWithClients(patch?: ConfigPatch): { readonly server: TestServer; readonly clients: GrpcClients } {
  const served = {} as { server: TestServer; clients: GrpcClients };
  before(async () => {
    served.server = await startTestServer(patch);
    served.clients = grpcClients(served.server.port);
  });
  after(async () => {
    served.clients?.close();
    await served.server?.stop();
  });
  return served;
}

/** Promisifies a grpc-js unary call: `call<Res>((cb) => client.method(req, md, cb))`. */
export function call<Res>(start: (cb: (err: grpc.ServiceError | null, res: Res) => void) => unknown): Promise<Res> {
  return new Promise((resolve, reject) => start((err, res) => (err ? reject(err) : resolve(res))));
}

export type ConnectProtocol = "connect" | "grpc-web" | "grpc";

/** A Connect-ES client over the Connect protocol (HTTP/1.1), gRPC-Web (HTTP/1.1) or gRPC (h2c). */
export function connectClient<S extends DescService>(service: S, port: number, protocol: ConnectProtocol, user?: string): Client<S> {
  const baseUrl = `http://127.0.0.1:${port}`;
  const interceptors = user ? [authHeader(user)] : [];
  const transport =
    protocol === "connect"
      ? createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors })
      : protocol === "grpc-web"
        ? createGrpcWebTransport({ baseUrl, httpVersion: "1.1", interceptors })
        : createGrpcTransport({ baseUrl, interceptors });
  return createClient(service, transport);
}

function authHeader(user: string): Interceptor {
  return (next) => async (req) => {
    req.header.set("authorization", basic(user));
    return next(req);
  };
}
