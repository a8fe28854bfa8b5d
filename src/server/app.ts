import { create, createFileRegistry, type DescFile } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import type { Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { createRestHandler } from "../edge/rest-handler.js";
import { RouteTable } from "../edge/route-table.js";
import type { RegisteredService } from "../edge/service-registry.js";
import { createHealth, Health } from "./health.js";
import { listenOnePort, type OnePortServer } from "./listener.js";
import type { Logger } from "./logger.js";
import { createReflection, ReflectionV1, ReflectionV1Alpha } from "./reflection.js";

export interface ServerOptions {
  readonly port: number;
  readonly host: string;
  readonly services: readonly RegisteredService[];
  readonly interceptors: readonly Interceptor[];
  readonly maxBodyBytes: number;
  readonly maxUploadBytes: number;
  readonly logger: Logger;
}

export interface RunningServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * One port, every protocol: the Connect adapter answers gRPC, gRPC-Web and Connect for the services,
 * reflection and health; whatever it does not route falls back to the REST edge, which runs the same
 * handlers behind the same interceptors.
 */
export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const shutdown = new AbortController();
  const served = [...opts.services.map((s) => s.desc), Health];
  const serviceNames = [...served, ReflectionV1, ReflectionV1Alpha].map((s) => s.typeName);
  const reflection = createReflection(registryOf([...served.map((s) => s.file), ReflectionV1.file, ReflectionV1Alpha.file]), serviceNames);
  const onInternalError = (err: unknown) => opts.logger.error("internal error", { error: String((err as Error)?.stack ?? err) });

  const rest = createRestHandler({
    table: new RouteTable(opts.services),
    interceptors: opts.interceptors,
    maxBodyBytes: opts.maxBodyBytes,
    maxUploadBytes: opts.maxUploadBytes,
    shutdownSignal: shutdown.signal,
    onInternalError,
  });
  const handler = connectNodeAdapter({
    routes(router) {
      for (const s of opts.services) router.service(s.desc, s.impl);
      router.service(Health, createHealth(opts.services.map((s) => s.desc.typeName)));
      router.service(ReflectionV1, reflection.v1);
      router.service(ReflectionV1Alpha, reflection.v1alpha);
    },
    interceptors: [...opts.interceptors],
    readMaxBytes: opts.maxBodyBytes,
    shutdownSignal: shutdown.signal,
    fallback: rest,
  });
  const server: OnePortServer = await listenOnePort(handler, opts.port, opts.host);
  opts.logger.info("listening", { port: server.port, protocols: ["grpc", "grpc-web", "connect", "rest"] });
  return {
    port: server.port,
    async close() {
      shutdown.abort();
      await server.close();
    },
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
