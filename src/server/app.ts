import { setMaxListeners } from "node:events";
import { create, createFileRegistry, type DescFile } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { createContextValues, type ContextValues, type Interceptor } from "@connectrpc/connect";
import { clientAddressKey } from "../auth/caller.js";
import { CallKernel } from "../transport/call/call-kernel.js";
import type { ServerRequest } from "../transport/http.js";
import { createRest } from "../transport/protocols/rest/rest.js";
import { observerIn } from "../interceptors/call-observer.js";
import { RouteTable } from "../transport/protocols/rest/route-table.js";
import { createConnectEs } from "../transport/protocols/rpc/connect-es.js";
import { createFastUnary } from "../transport/protocols/rpc/fast-unary.js";
import { createFrontRouter } from "../transport/router/front-router.js";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { buildOpenApi } from "../openapi/document.js";
import { apiDocs } from "../openapi/docs-handler.js";
import type { LimitsConfig } from "../config/config.js";
import type { UserDirectory } from "../auth/users.js";
import type { Registry } from "prom-client";
import { metricsResource } from "./metrics-handler.js";
import { registerService, routeMethods, type RegisteredService } from "../transport/service-registry.js";
import { createHealth, Health } from "./health.js";
import type { ServingState } from "./lifecycle.js";
import { listenOnePort, type ConnectionLimits, type LocalDoor, type OnePortServer } from "../listener/listener.js";
import type { Logger } from "./logger.js";
import { createReflection, ReflectionV1, ReflectionV1Alpha } from "./reflection.js";
import type { TlsCredentials } from "../listener/tls.js";

export interface ServerOptions {
  readonly port: number;
  readonly host: string;
  /** Given: HTTPS only on the port; absent: cleartext only. */
  readonly tls?: TlsCredentials;
  readonly services: readonly RegisteredService[];
  readonly interceptors: readonly Interceptor[];
  readonly maxBodyBytes: number;
  readonly maxUploadBytes: number;
  readonly timeouts: Timeouts;
  readonly logger: Logger;
  /** What health reports: NOT_SERVING once a stop begins. */
  readonly serving: ServingState;
  /** GET /metrics, for callers of `users` with a role that may read it. */
  readonly metrics: { readonly registry: Registry; readonly users: UserDirectory };
  /** Unary RPCs on the unary fast path (src/transport/protocols/rpc/fast-unary.ts); false: Connect-ES serves every RPC. */
  readonly unaryFastPath: boolean;
  /** The client's address of a request (src/server/client-address.ts). */
  readonly clientAddress: (req: ServerRequest) => string | undefined;
}

/** The connection and request time bounds of the configuration. */
export type Timeouts = Pick<
  LimitsConfig,
  "idleTimeoutSeconds" | "headersTimeoutSeconds" | "requestTimeoutSeconds" | "bodyIdleTimeoutSeconds"
>;

export interface RunningServer {
  readonly port: number;
  /** The same service on a Unix socket too (OnePortServer.openLocal): the warm-up's way in. */
  openLocal(socketPath: string): Promise<LocalDoor>;
  close(): Promise<void>;
}

/**
 * One port, every protocol: the front router hands each request to one protocol adapter (the unary
 * fast path or Connect-ES for gRPC, gRPC-Web and Connect, REST for the routes of the annotations) or
 * to /metrics and the API's description; every adapter runs the same handlers behind the same
 * interceptors, each call opened by the one call kernel.
 */
export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const shutdown = new AbortController();
  // Every call in flight listens to it (to end when the service stops): no bound of 10 listeners.
  setMaxListeners(0, shutdown.signal);
  const served = [...opts.services.map((s) => s.desc), Health];
  const serviceNames = [...served, ReflectionV1, ReflectionV1Alpha].map((s) => s.typeName);
  const reflection = createReflection(registryOf([...served.map((s) => s.file), ReflectionV1.file, ReflectionV1Alpha.file]), serviceNames);
  const onInternalError = (err: unknown) => opts.logger.error("internal error", { error: String((err as Error)?.stack ?? err) });

  // Every transport starts a call's context values here, so that only the composition knows auth's key.
  const contextValues = (req: ServerRequest): ContextValues => createContextValues().set(clientAddressKey, opts.clientAddress(req));
  const health = createHealth(
    opts.services.map((s) => s.desc.typeName),
    opts.serving,
  );
  const table = new RouteTable(opts.services);
  const kernel = new CallKernel({ contextValues, shutdownSignal: shutdown.signal, refused: observerIn(opts.interceptors)?.refused });
  const rest = createRest({
    interceptors: opts.interceptors,
    kernel,
    maxBodyBytes: opts.maxBodyBytes,
    maxUploadBytes: opts.maxUploadBytes,
    onInternalError,
  });
  const compressions = [compressionGzip, compressionBrotli];
  const connect = createConnectEs({
    routes(router) {
      for (const s of opts.services) routeMethods(router, s);
      router.service(Health, health);
      router.service(ReflectionV1, reflection.v1);
      router.service(ReflectionV1Alpha, reflection.v1alpha);
    },
    interceptors: [...opts.interceptors],
    kernel,
    readMaxBytes: opts.maxBodyBytes,
    acceptCompression: compressions,
    shutdownSignal: shutdown.signal,
    onHandlerError: onInternalError,
  });
  const fastUnary = opts.unaryFastPath
    ? createFastUnary({
        services: [...opts.services, registerService(Health, health, { alwaysEmitImplicit: false })],
        interceptors: opts.interceptors,
        kernel,
        readMaxBytes: opts.maxBodyBytes,
        compressions,
        onInternalError,
      })
    : undefined;
  const router = createFrontRouter({
    connect,
    fastUnary,
    rest,
    restRoutes: table,
    // Not RPCs: no interceptor runs for them.
    resources: new Map([
      ...metricsResource(opts.metrics.registry, opts.metrics.users, opts.clientAddress, onInternalError),
      ...apiDocs(buildOpenApi(table)),
    ]),
    kernel,
  });
  const limits = connectionLimits(opts.timeouts, router.streamsRequest);
  const server: OnePortServer = await listenOnePort(router.handle, { port: opts.port, host: opts.host, limits, tls: opts.tls });
  opts.logger.info("listening", {
    port: server.port,
    scheme: opts.tls ? "https" : "http",
    protocols: ["grpc", "grpc-web", "connect", "rest"],
  });
  return {
    port: server.port,
    openLocal: (socketPath) => server.openLocal(socketPath),
    async close() {
      shutdown.abort();
      await server.close();
    },
  };
}

function connectionLimits(t: Timeouts, streamsRequest: ConnectionLimits["streamsRequest"]): ConnectionLimits {
  return {
    idleMs: t.idleTimeoutSeconds * 1000,
    headersMs: t.headersTimeoutSeconds * 1000,
    requestMs: t.requestTimeoutSeconds * 1000,
    bodyIdleMs: t.bodyIdleTimeoutSeconds * 1000,
    streamsRequest,
  };
}

/** A file registry of the given files and everything they import, dependencies first. */
function registryOf(files: readonly DescFile[]) {
  const ordered: DescFile[] = [];
  const visit = (f: DescFile) => {
    if (ordered.includes(f)) return;
    f.dependencies.forEach(visit);
    ordered.push(f);
  };
  files.forEach(visit);
  return createFileRegistry(create(FileDescriptorSetSchema, { file: ordered.map((f) => f.proto) }));
}
