import type { ServiceImpl } from "@connectrpc/connect";
import type { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import type { NodeConfig, RConfig } from "../config/config.js";
import type { REngine } from "../r/engine.js";
import { commandHandlers } from "./command-handlers.js";
import { fileHandlers } from "./file-handlers.js";
import type { PackageHandlers } from "./packages.js";
import { serverHandlers } from "./server-handlers.js";
import { sessionHandlers } from "./session-handlers.js";

export interface RServiceDeps {
  readonly engine: REngine;
  readonly node: NodeConfig;
  readonly r: RConfig;
  readonly maxUploadBytes: number;
}

/** RService over the R engine, packages excepted (src/rservice/packages.ts). */
export function createRServiceHandlers(deps: RServiceDeps): Omit<ServiceImpl<typeof RService>, keyof PackageHandlers> {
  const { engine, node, r, maxUploadBytes } = deps;
  return {
    ...serverHandlers(engine, node, r),
    ...sessionHandlers(engine),
    ...commandHandlers(engine, r.commandWaitSeconds * 1000),
    ...fileHandlers(engine, maxUploadBytes),
  };
}
