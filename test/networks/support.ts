import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createContextValues, createHandlerContext, type HandlerContext } from "@connectrpc/connect";
import { NetworkService } from "../../gen/es/rock/networks/v1/networks_pb.js";
import { callerKey, type Caller } from "../../src/auth/caller.js";
import { Fault } from "../../src/errors/fault.js";
import { NetworkCatalog, type CatalogOptions } from "../../src/networks/catalog.js";

export async function tempDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), "networks-test-"));
}

/** A catalogue in a fresh folder; `dispose` closes it and removes the folder. */
export async function openTempCatalog(options: CatalogOptions = {}) {
  const dir = await tempDir();
  const catalog = await NetworkCatalog.open(join(dir, "networks"), options);
  return {
    dir,
    catalog,
    async dispose() {
      await catalog.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export function caller(name: string, ...roles: string[]): Caller {
  return { name, roles: new Set(roles) };
}

export const admin = caller("alice", "catalog-administrator");
export const reviewer = caller("rita", "catalog-reviewer");
export const editor = caller("ed", "catalog-editor");
export const outsider = caller("olga");

type MethodName = keyof typeof NetworkService.method;

/** A handler context as the Connect router builds it, with the caller the auth interceptor sets. */
export function contextFor(who: Caller, method: MethodName): HandlerContext {
  return createHandlerContext({
    service: NetworkService,
    method: NetworkService.method[method],
    protocolName: "connect",
    requestMethod: "POST",
    url: `http://localhost/rock.networks.v1.NetworkService/${method}`,
    contextValues: createContextValues().set(callerKey, who),
  });
}

/** The Fault that `work` fails with; anything else (success included) fails the test. */
export async function rejection(work: () => unknown): Promise<Fault> {
  try {
    await work();
  } catch (e) {
    if (e instanceof Fault) return e;
    throw e;
  }
  throw new Error("expected a Fault");
}
