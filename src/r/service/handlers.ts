import type { ServiceImpl } from "@connectrpc/connect";
import type { RService } from "../../../gen/es/rock/r/v1/rservice_pb.js";
import type { NodeConfig, RConfig } from "../../config/config.js";
import type { REngine } from "../engine/engine.js";
import { commandHandlers } from "./command-handlers.js";
import { fileHandlers } from "./file-handlers.js";
import { createPackageHandlers, type PackageOperations } from "./package-handlers.js";
import { serverHandlers } from "./server-handlers.js";
import { sessionHandlers } from "./session-handlers.js";

export interface RServiceDeps {
  readonly engine: REngine;
  readonly node: NodeConfig;
  readonly r: RConfig;
  readonly maxUploadBytes: number;
  /** limits.maxAssignBytes: an assign's serialization, as sent. */
  readonly maxAssignBytes: number;
  /** limits.maxBodyBytes: an assign's script, held whole. */
  readonly maxBodyBytes: number;
  readonly packages: PackageOperations;
  /** False while the service warms up (src/server/warm-up.ts): /_check answers 500 until then. */
  readonly ready: () => boolean;
}

/** RService over the R engine and the package manager; a handler left out fails to type-check. */
export function createRServiceHandlers(deps: RServiceDeps): ServiceImpl<typeof RService> {
  const { engine, node, r, maxUploadBytes, maxAssignBytes, maxBodyBytes, packages, ready } = deps;
  return {
    ...serverHandlers(engine, node, r, ready),
    ...sessionHandlers(engine, { maxBytes: maxAssignBytes, maxScriptBytes: maxBodyBytes }),
    ...commandHandlers(engine, r.commandWaitSeconds * 1000),
    ...fileHandlers(engine, maxUploadBytes),
    ...createPackageHandlers(packages),
  };
}
