import { Code, ConnectError, createConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
  type ConnectNodeAdapterOptions,
} from "@connectrpc/connect-node";
import { guardUnaryDecoding, streamDecodeErrors } from "./decode-guard.js";

type NodeHandlerFn = NonNullable<ConnectNodeAdapterOptions["fallback"]>;

export type RpcAdapterOptions = Omit<ConnectNodeAdapterOptions, "requestPathPrefix" | "fallback"> & {
  readonly fallback: NodeHandlerFn;
  /** A call Connect could not answer (not called when the client has gone). */
  readonly onHandlerError: (err: unknown) => void;
};

/** Connect's own default limit of a message. */
const CONNECT_READ_MAX_BYTES = 0xffffffff;

/**
 * What connectNodeAdapter does (gRPC, gRPC-Web and Connect by request path, anything else to the
 * fallback), with request messages that do not decode answered INVALID_ARGUMENT instead of INTERNAL
 * (decode-guard.ts): the adapter gives no way to wrap its handlers.
 */
export function rpcAdapter(options: RpcAdapterOptions): NodeHandlerFn {
  const compressions = options.acceptCompression ?? [compressionGzip, compressionBrotli];
  const router = createConnectRouter({ ...options, acceptCompression: compressions, interceptors: [streamDecodeErrors, ...(options.interceptors ?? [])] });
  options.routes(router);
  const guard = { readMaxBytes: options.readMaxBytes ?? CONNECT_READ_MAX_BYTES, compressions };
  const handlers = new Map<string, UniversalHandler>(router.handlers.map((h) => [h.requestPath, guardUnaryDecoding(h, guard)]));
  return (req, res) => {
    const url = req.url ?? "";
    const q = url.indexOf("?");
    const handler = handlers.get(q < 0 ? url : url.slice(0, q));
    if (!handler) return options.fallback(req, res);
    handler(universalRequestFromNodeRequest(req, res, undefined, options.contextValues?.(req)))
      .then((answer) => universalResponseToNodeResponse(answer, res))
      .catch((reason: unknown) => {
        // A response the listener already ended (408 to a body that did not come) leaves Connect
        // nothing to write: not a fault.
        if (ConnectError.from(reason).code !== Code.Aborted && !res.writableEnded) options.onHandlerError(reason);
      });
  };
}
