import type { ServiceImpl } from "@connectrpc/connect";
import type { RService } from "../../../gen/es/rock/r/v1/rservice_pb.js";
import { Fault } from "../../errors/fault.js";
import type { REngine } from "../engine/engine.js";
import { openDownload, Upload } from "../session/files.js";
import { OCTET_STREAM } from "./negotiate.js";
import type { RSession } from "../session/session.js";
import { SESSION_USERS, sessionFor } from "./permissions.js";

/**
 * How long an RPC upload waits, once its request stream ended, for a reset of the call. A client
 * cancelling an HTTP/2 stream (grpc-js, Node) half-closes it before it resets it, so the server first
 * sees a complete request, and only the reset that follows says it was cut short.
 */
const CANCEL_SETTLE_MS = 25;

function cancelledAfterEnd(signal: AbortSignal, protocol: string): Promise<boolean> {
  if (signal.aborted || protocol === "rest") return Promise.resolve(signal.aborted);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(false);
    }, CANCEL_SETTLE_MS);
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** File systems refuse longer names (NAME_MAX) and paths; refused here first, with a message. */
const MAX_PATH_BYTES = 1024;
const MAX_NAME_BYTES = 255;

/** A client's file path within the limits the file system would otherwise fail on (400). */
function checkedPath(path: string): string {
  if (path.includes("\0")) throw new Fault("invalid", "File path must not contain a NUL character");
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) {
    throw new Fault("invalid", `File path is longer than ${MAX_PATH_BYTES} bytes`);
  }
  if (path.split("/").some((name) => Buffer.byteLength(name) > MAX_NAME_BYTES)) {
    throw new Fault("invalid", `A file or folder name in the path is longer than ${MAX_NAME_BYTES} bytes`);
  }
  return path;
}

export type FileHandlers = Pick<ServiceImpl<typeof RService>, "uploadFile" | "downloadFile">;

/** `maxUploadBytes` bounds gRPC and Connect uploads (the REST edge stops oversize bodies itself). */
export function fileHandlers(engine: REngine, maxUploadBytes: number): FileHandlers {
  return {
    async uploadFile(requests, ctx) {
      let session: RSession | undefined;
      let files: Awaited<ReturnType<RSession["useFiles"]>> | undefined;
      let upload: Upload | undefined;
      let path: string | undefined;
      let fileName: string | undefined;
      let overwrite = false;
      let temp = false;
      try {
        for await (const req of requests) {
          session ??= sessionFor(engine, ctx, req.id, SESSION_USERS);
          files ??= await session.useFiles();
          if (req.path !== undefined) path = checkedPath(req.path);
          if (req.fileName !== undefined) fileName = checkedPath(req.fileName);
          if (req.overwrite !== undefined) overwrite = req.overwrite;
          if (req.temp !== undefined) temp = req.temp;
          const data = req.chunk?.data;
          if (data && data.length > 0) {
            upload ??= new Upload(files.dirs.home, files.dirs.owner);
            if (upload.size + data.length > maxUploadBytes) {
              throw new Fault("too_large", `Upload exceeds the limit of ${maxUploadBytes} bytes`);
            }
            await upload.write(data);
          }
        }
        if (await cancelledAfterEnd(ctx.signal, ctx.protocolName)) throw new Fault("canceled", "Upload cancelled before its end");
        if (!session || !files) throw new Fault("invalid", "Upload names no R session");
        upload ??= new Upload(files.dirs.home, files.dirs.owner);
        session.touch();
        const root = temp ? files.dirs.tmp : files.dirs.work;
        const stored = await upload.commit({ root, path: path ?? fileName ?? "", overwrite });
        return { path: stored.path, size: stored.size };
      } finally {
        await upload?.discard();
        files?.done();
      }
    },

    async *downloadFile(req, ctx) {
      const session = sessionFor(engine, ctx, req.id, SESSION_USERS);
      // Without it the root itself would be the source: "File is a directory" would hide the client's slip.
      if (req.path === "") throw new Fault("invalid", "path is required");
      const path = checkedPath(req.path);
      const files = await session.useFiles();
      try {
        const chunks = await openDownload(files.dirs, req.temp, path);
        for await (const data of chunks) yield { chunk: { contentType: OCTET_STREAM, data } };
      } finally {
        files.done();
      }
    },
  };
}
