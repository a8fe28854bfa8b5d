import { create, fromJson, type JsonObject } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { HttpBodySchema, type HttpBody } from "../../../gen/es/google/api/httpbody_pb.js";
import { PackageMatrixSchema, type RService } from "../../../gen/es/rock/r/v1/rservice_pb.js";
import { Channel } from "../../channel.js";
import { Fault } from "../../errors/fault.js";
import type { PackageManager } from "../packages/index.js";
import { negotiate, OCTET_STREAM } from "./negotiate.js";

export type PackageHandlers = Pick<
  ServiceImpl<typeof RService>,
  | "listPackages"
  | "updatePackages"
  | "removePackages"
  | "installPackage"
  | "installPackageStream"
  | "getPackageSettings"
  | "getPackage"
  | "removePackage"
>;

/** What the handlers need of a PackageManager (its public surface). */
export type PackageOperations = Pick<
  PackageManager,
  "list" | "listSerialized" | "describe" | "describeSerialized" | "settings" | "settingsSerialized" | "install" | "update" | "remove"
>;

function wantsSerialized(accept: string): boolean {
  return negotiate(accept) === "rds";
}

function serialized(data: Uint8Array): HttpBody {
  return create(HttpBodySchema, { contentType: OCTET_STREAM, data });
}

export function createPackageHandlers(manager: PackageOperations): PackageHandlers {
  return {
    async listPackages(request, ctx) {
      const run = { signal: ctx.signal };
      if (wantsSerialized(request.accept)) {
        return { answer: { case: "serialized", value: serialized(await manager.listSerialized(run)) } };
      }
      const matrix = await manager.list(run);
      return {
        answer: {
          case: "matrix",
          value: create(PackageMatrixSchema, {
            rowNames: matrix.rowNames,
            columnNames: matrix.columnNames,
            rows: matrix.rows.map((row) => fromJson(ListValueSchema, row)),
          }),
        },
      };
    },

    async getPackage(request, ctx) {
      const run = { signal: ctx.signal };
      if (wantsSerialized(request.accept)) {
        return { answer: { case: "serialized", value: serialized(await manager.describeSerialized(request.name, run)) } };
      }
      const description: JsonObject = await manager.describe(request.name, run);
      return { answer: { case: "description", value: description } };
    },

    async getPackageSettings(request, ctx) {
      const run = { signal: ctx.signal };
      if (wantsSerialized(request.accept)) {
        return { answer: { case: "serialized", value: serialized(await manager.settingsSerialized(run)) } };
      }
      const settings: JsonObject = await manager.settings(run);
      return { answer: { case: "settings", value: settings } };
    },

    async installPackage(request, ctx) {
      const installed = await manager.install({ name: request.name, manager: request.manager, ref: request.ref }, { signal: ctx.signal });
      return { version: installed.version };
    },

    async updatePackages(_request, ctx) {
      return manager.update({ signal: ctx.signal });
    },

    async removePackages(request, ctx) {
      await manager.remove(request.name, { signal: ctx.signal });
      return {};
    },

    async removePackage(request, ctx) {
      await manager.remove([request.name], { signal: ctx.signal });
      return {};
    },

    async *installPackageStream(request, ctx) {
      // Unbounded: R never waits for a slow reader. The caller leaving (cancel, deadline) stops the
      // operation through the signal and ends the channel: stop waiting for its lines too.
      const lines = new Channel<string>({ signal: ctx.signal });
      const operation = request.update
        ? updateAll(manager, request.name, lines, ctx)
        : manager
            .install(
              { name: request.name, manager: request.manager, ref: request.ref },
              { signal: ctx.signal, onLine: (line) => void lines.push(line) },
            )
            .then((installed) => installed.version);
      operation.then(
        () => lines.close(),
        () => lines.close(),
      );
      try {
        for await (const line of lines) {
          yield { event: { case: "line", value: line } };
        }
      } catch (left) {
        // The caller left: the call ends once R and what it started are gone and their files removed.
        await operation.catch(() => undefined);
        throw left;
      }
      const version = await operation;
      yield { event: { case: "installedVersion", value: version } };
    },
  };
}

async function updateAll(manager: PackageOperations, name: string, lines: Channel<string>, ctx: HandlerContext): Promise<string> {
  if (name.trim() !== "") {
    // Refused rather than silently updating everything the caller did not name.
    throw new Fault("invalid", "An update applies to every package; leave the name empty");
  }
  await manager.update({ signal: ctx.signal, onLine: (line) => void lines.push(line) });
  return "";
}
