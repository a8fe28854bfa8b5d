import path from "node:path";
import { authInterceptor } from "./auth/interceptor.js";
import { bootstrapUsers } from "./auth/bootstrap.js";
import { UserDirectory } from "./auth/users.js";
import type { Config } from "./config/config.js";
import { registerService } from "./edge/service-registry.js";
import { NetworkService } from "../gen/es/rock/networks/v1/networks_pb.js";
import { RService } from "../gen/es/rock/r/v1/rservice_pb.js";
import { NetworkCatalog } from "./networks/catalog.js";
import { createNetworkServiceHandlers } from "./networks/handlers.js";
import { startServer } from "./server/app.js";
import { createLogger, type Logger } from "./server/logger.js";

export interface Rock {
  readonly port: number;
  close(): Promise<void>;
}

export interface ComposeOptions {
  readonly logger?: Logger;
  /** Where the one-time generated administrator password is shown. */
  readonly announce?: (text: string) => void;
}

/** config → users → R engine → stores → one server for every protocol. */
export async function startRock(config: Config, opts: ComposeOptions = {}): Promise<Rock> {
  const logger = opts.logger ?? createLogger();
  const users = new UserDirectory(await bootstrapUsers(config.users, config.dataDir, opts.announce ?? ((t) => process.stdout.write(t + "\n"))));
  const catalog = await NetworkCatalog.open(path.join(config.dataDir, "networks"));
  try {
    const server = await startServer({
      port: config.port,
      host: config.host,
      services: [
        registerService(RService, {}, { alwaysEmitImplicit: true }),
        registerService(NetworkService, createNetworkServiceHandlers(catalog), { alwaysEmitImplicit: false }),
      ],
      interceptors: [authInterceptor(users)],
      maxBodyBytes: config.limits.maxBodyBytes,
      maxUploadBytes: config.limits.maxUploadBytes,
      logger,
    });
    return {
      port: server.port,
      async close() {
        await server.close();
        await catalog.close();
      },
    };
  } catch (e) {
    await catalog.close();
    throw e;
  }
}
