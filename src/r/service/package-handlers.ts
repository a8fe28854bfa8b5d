import { create, fromJson, type JsonObject } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { HttpBodySchema, type HttpBody } from "../../../gen/es/google/api/httpbody_pb.js";
import { PackageMatrixSchema, type RService } from "../../../gen/es/rock/r/v1/rservice_pb.js";
import type { PackageManager } from "../packages/index.js";
import { negotiate, OCTET_STREAM } from "../negotiate.js";
import { setHttpStatus } from "../../server/rest-hints.js";

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
  | "list"
  | "listSerialized"
  | "describe"
  | "describeSerialized"
  | "settings"
  | "settingsSerialized"
  | "install"
  | "update"
  | "remove"
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
      const installed = await manager.install(
        { name: request.name, manager: request.manager, ref: request.ref },
        { signal: ctx.signal },
      );
      setHttpStatus(ctx, 204);
      return { version: installed.version };
    },

    // 200 with no body, as the contract lists (reference-behaviour §3); installs and removals are 204.
    async updatePackages(_request, ctx) {
      await manager.update({ signal: ctx.signal });
      return {};
    },

    async removePackages(request, ctx) {
      await manager.remove(request.name, { signal: ctx.signal });
      setHttpStatus(ctx, 204);
      return {};
    },

    async removePackage(request, ctx) {
      await manager.remove([request.name], { signal: ctx.signal });
      setHttpStatus(ctx, 204);
      return {};
    },

    async *installPackageStream(request, ctx) {
      const lines = new LineQueue();
      const operation = request.update
        ? updateAll(manager, request.name, lines, ctx)
        : manager
            .install(
              { name: request.name, manager: request.manager, ref: request.ref },
              { signal: ctx.signal, onLine: (line) => lines.push(line) },
            )
            .then((installed) => installed.version);
      operation.then(
        () => lines.close(),
        () => lines.close(),
      );
      for await (const line of lines) {
        yield { event: { case: "line", value: line } };
      }
      const version = await operation;
      yield { event: { case: "installedVersion", value: version } };
    },
  };
}

async function updateAll(manager: PackageOperations, name: string, lines: LineQueue, ctx: HandlerContext): Promise<string> {
  if (name.trim() !== "") {
    // Refused rather than silently updating everything the caller did not name.
    throw new ConnectError("An update applies to every package; leave the name empty", Code.InvalidArgument);
  }
  await manager.update({ signal: ctx.signal, onLine: (line) => lines.push(line) });
  return "";
}

/** Lines R prints, handed to the stream as they come; R never waits for a slow reader. */
class LineQueue implements AsyncIterable<string> {
  private readonly buffered: string[] = [];
  private closed = false;
  private wake: (() => void) | undefined;

  push(line: string): void {
    if (this.closed) return;
    this.buffered.push(line);
    this.notify();
  }

  close(): void {
    this.closed = true;
    this.notify();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<string> {
    for (;;) {
      const line = this.buffered.shift();
      if (line !== undefined) {
        yield line;
        continue;
      }
      if (this.closed) return;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }
}
