import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { createContextValues, createHandlerContext } from "@connectrpc/connect";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { callerKey, type Caller } from "../../src/auth/caller.js";
import type { NodeConfig, RConfig } from "../../src/config/config.js";
import { defaults } from "../../src/config/load.js";
import { decideIsolation, sessionsRoot } from "../../src/r/confine/isolation.js";
import type { SessionQuotas } from "../../src/r/confine/quotas.js";
import { testSessionUids } from "../support/uids.js";
import { ConsoleLog } from "../../src/r/process/console-log.js";
import { REngine, type EngineEvent } from "../../src/r/engine/engine.js";
import { PackageManager } from "../../src/r/packages/manager.js";
import { createRServiceHandlers } from "../../src/r/service/handlers.js";

export const NODE: NodeConfig = { id: "rock-test", cluster: "test", tags: ["t1"] };

export function rConfig(overrides: Partial<RConfig> = {}): RConfig {
  return {
    ...defaults().r,
    sessionUids: testSessionUids(),
    executable: "R",
    startOnBoot: true,
    autoRestart: false,
    sessionTimeoutMinutes: 0,
    sessionCheckSeconds: 0,
    maxEvalSeconds: 0,
    commandWaitSeconds: 10,
    logMaxBytes: 1_000_000,
    logFiles: 2,
    encoding: "UTF-8",
    ...overrides,
  };
}

export interface Rig {
  readonly engine: REngine;
  readonly log: ConsoleLog;
  readonly dataDir: string;
  readonly config: RConfig;
  readonly handlers: ReturnType<typeof createRServiceHandlers>;
  close(): Promise<void>;
}

/**
 * A started engine over a fresh data folder (or `dataDir`); close() stops R and removes the folder.
 * `library` is a package library folder relative to the data folder; `quotas`, the caller's to close.
 */
export async function startRig(
  overrides: Partial<RConfig> = {},
  options: {
    library?: string;
    maxUploadBytes?: number;
    dataDir?: string;
    onEvent?: (event: EngineEvent) => void;
    quotas?: SessionQuotas;
  } = {},
): Promise<Rig> {
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "rock-r-test-")));
  // Isolated sessions pass through the data folder to theirs, as the service's data folder allows.
  await chmod(dataDir, 0o711);
  const config = rConfig(overrides);
  const log = new ConsoleLog({ file: join(dataDir, "rserver.log"), maxBytes: config.logMaxBytes, files: config.logFiles });
  const library = options.library === undefined ? {} : { library: join(dataDir, options.library) };
  const { isolated } = decideIsolation(config);
  const quotas = options.quotas ? { quotas: options.quotas } : {};
  const engine = new REngine({
    config,
    dataDir,
    sessionsDir: sessionsRoot(config, dataDir, isolated),
    isolated,
    log,
    onEvent: options.onEvent,
    ...library,
    ...quotas,
  });
  // Package RPCs are tested in test/packages; here a manager that only exists, over a folder of its own.
  const packages = new PackageManager({
    rExecutable: config.executable,
    repos: [],
    gitHost: "",
    gitOrganization: "",
    scratchDir: join(dataDir, "packages-tmp"),
    log: (text) => log.append(text),
    timeoutSeconds: 60,
  });
  const handlers = createRServiceHandlers({
    engine,
    node: NODE,
    r: config,
    maxUploadBytes: options.maxUploadBytes ?? 1 << 30,
    maxAssignBytes: 1 << 30,
    maxBodyBytes: 1 << 26,
    packages,
    ready: () => true,
  });
  const close = async (): Promise<void> => {
    await engine.close();
    log.close();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    await engine.boot();
  } catch (error) {
    await close();
    throw error;
  }
  return { engine, log, dataDir, config, handlers, close };
}

export function caller(name: string, ...roles: string[]): Caller {
  return { name, roles: new Set(roles) };
}

/** A handler context for `who`, as the auth interceptor would leave it. */
export function ctxOf(who: Caller, signal?: AbortSignal): ReturnType<typeof createHandlerContext> {
  return createHandlerContext({
    service: RService,
    method: RService.method.eval,
    protocolName: "connect",
    requestMethod: "POST",
    url: "http://localhost/test",
    requestSignal: signal,
    contextValues: createContextValues().set(callerKey, who),
  });
}

/** Runs R code in a separate Rscript and returns what it printed: expectations computed by R itself. */
export function rscript(code: string): string {
  return execFileSync("Rscript", ["--vanilla", "-e", code], { encoding: "utf8" });
}

export async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

export const text = (s: string): Uint8Array => Buffer.from(s, "utf8");

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `condition` until it holds, failing after `ms`. */
export async function until(condition: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await sleep(20);
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
