import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import type { REngine } from "../r/engine.js";
import { openDownload, Upload } from "../r/files.js";
import { OCTET_STREAM } from "../r/negotiate.js";
import type { RSession } from "../r/session.js";
import { SESSION_USERS, sessionFor } from "./access.js";
import { HTTP_CODE_HEADER } from "../server/rest-hints.js";

export type FileHandlers = Pick<ServiceImpl<typeof RService>, "uploadFile" | "downloadFile">;

/** `maxUploadBytes` bounds gRPC and Connect uploads (the REST edge stops oversize bodies itself). */
export function fileHandlers(engine: REngine, maxUploadBytes: number): FileHandlers {
  return {
    async uploadFile(requests, ctx) {
      let session: RSession | undefined;
      let upload: Upload | undefined;
      let path: string | undefined;
      let fileName: string | undefined;
      let overwrite = false;
      let temp = false;
      try {
        for await (const req of requests) {
          session ??= sessionFor(engine, ctx, req.id, SESSION_USERS);
          if (req.path !== undefined) path = req.path;
          if (req.fileName !== undefined) fileName = req.fileName;
          if (req.overwrite !== undefined) overwrite = req.overwrite;
          if (req.temp !== undefined) temp = req.temp;
          const data = req.chunk?.data;
          if (data && data.length > 0) {
            upload ??= new Upload(session.dirs.home);
            if (upload.size + data.length > maxUploadBytes) {
              throw new ConnectError(`Upload exceeds the limit of ${maxUploadBytes} bytes`, Code.ResourceExhausted, { [HTTP_CODE_HEADER]: "413" });
            }
            await upload.write(data);
          }
        }
        if (!session) throw new ConnectError("Upload names no R session", Code.InvalidArgument);
        upload ??= new Upload(session.dirs.home);
        session.touch();
        const root = temp ? session.dirs.tmp : session.dirs.work;
        const stored = await upload.commit({ root, path: path ?? fileName ?? "", overwrite });
        return { path: stored.path, size: BigInt(stored.size) };
      } finally {
        await upload?.discard();
      }
    },

    async *downloadFile(req, ctx) {
      const session = sessionFor(engine, ctx, req.id, SESSION_USERS);
      session.touch();
      const chunks = await openDownload(req.temp ? session.dirs.tmp : session.dirs.work, req.path);
      for await (const data of chunks) yield { chunk: { contentType: OCTET_STREAM, data } };
    },
  };
}
