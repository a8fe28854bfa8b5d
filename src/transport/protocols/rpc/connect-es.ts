import { Code, ConnectError, createConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
  type ConnectNodeAdapterOptions,
} from "@connectrpc/connect-node";
import type { OutgoingHttpHeaders } from "node:http";
import * as connect from "@connectrpc/connect/protocol-connect";
import * as grpc from "@connectrpc/connect/protocol-grpc";
import { MAX_TIMER_MS } from "../../call/call-context.js";
import type { CallKernel } from "../../call/call-kernel.js";
import { ResponseMeter } from "../../../interceptors/response-meter.js";
import type { ServerRequest, ServerResponse } from "../../http.js";
import { guardUnaryDecoding, streamDecodeErrors } from "./decode-guard.js";
import { encodeGrpcMessage } from "./grpc-message.js";
import { dropUnreadBody } from "../read-body.js";

export type ConnectEsOptions = Omit<ConnectNodeAdapterOptions, "requestPathPrefix" | "fallback" | "contextValues"> & {
  readonly kernel: CallKernel;
  /** A call Connect could not answer (not called when the client has gone). */
  readonly onHandlerError: (err: unknown) => void;
};

export interface ConnectEs {
  /** Each RPC's handler, by request path (`/pkg.Service/Method`). */
  readonly handlers: ReadonlyMap<string, UniversalHandler>;
  /** Serves a request of one of `handlers`, in whichever protocol it speaks. */
  serve(req: ServerRequest, res: ServerResponse, handler: UniversalHandler): void;
}

/** Connect's own default limit of a message. */
const CONNECT_READ_MAX_BYTES = 0xffffffff;

/**
 * What connectNodeAdapter does for the RPCs it routes (gRPC, gRPC-Web and Connect, every kind of
 * stream), with request messages that do not decode answered INVALID_ARGUMENT instead of INTERNAL
 * (decode-guard.ts): the adapter gives no way to wrap its handlers.
 */
export function createConnectEs(options: ConnectEsOptions): ConnectEs {
  const compressions = options.acceptCompression ?? [compressionGzip, compressionBrotli];
  const router = createConnectRouter({
    ...options,
    acceptCompression: compressions,
    interceptors: [streamDecodeErrors, ...(options.interceptors ?? [])],
  });
  options.routes(router);
  const guard = { readMaxBytes: options.readMaxBytes ?? CONNECT_READ_MAX_BYTES, compressions };
  const handlers = new Map<string, UniversalHandler>(router.handlers.map((h) => [h.requestPath, guardUnaryDecoding(h, guard)]));
  return {
    handlers,
    serve(req, res, handler) {
      dropUnreachableTimeout(req);
      if (req.httpVersionMajor === 2) specEncodedGrpcMessage(res);
      // The call's record (access line, metrics) waits for what was written of the answer.
      const meter = new ResponseMeter();
      const values = options.kernel.values(req, res, meter);
      handler(universalRequestFromNodeRequest(req, res, undefined, values))
        .then((answer) => {
          // A unary handler has read all it will of the request once it answers (a refusal, partly).
          if (handler.method.methodKind === "unary") dropUnreadBody(req);
          return universalResponseToNodeResponse(answer.body ? { ...answer, body: metered(answer.body, meter) } : answer, res);
        })
        .catch((reason: unknown) => {
          // A response the listener already ended (408 to a body that did not come) leaves Connect
          // nothing to write: not a fault.
          if (ConnectError.from(reason).code !== Code.Aborted && !res.writableEnded) options.onHandlerError(reason);
        });
    },
  };
}

/**
 * A timeout beyond a Node timer's reach (about 24.8 days) is no deadline at all, as on the fast path:
 * Connect-ES would arm a timer with it, which Node fires at once, and end the call as if it had passed.
 */
function dropUnreachableTimeout(req: ServerRequest): void {
  for (const [name, parse] of [
    [grpc.headerTimeout, grpc.parseTimeout],
    [connect.headerTimeout, connect.parseTimeout],
  ] as const) {
    const key = name.toLowerCase();
    const value = req.headers[key];
    if (typeof value !== "string") continue;
    const timeout = parse(value, Number.MAX_SAFE_INTEGER);
    if (timeout.timeoutMs !== undefined && timeout.timeoutMs > MAX_TIMER_MS) delete req.headers[key];
  }
}

/**
 * Connect-ES percent-encodes grpc-message with encodeURIComponent; grpc-js decodes it with decodeURI,
 * so a client would read `%2F` for `/`. Re-encoded as the gRPC spec says, both read it verbatim.
 */
function specEncodedGrpcMessage(res: ServerResponse): void {
  const addTrailers = res.addTrailers.bind(res);
  res.addTrailers = (trailers: OutgoingHttpHeaders) => {
    const message = trailers["grpc-message"];
    if (typeof message === "string") trailers["grpc-message"] = encodeGrpcMessage(decodeURIComponent(message));
    addTrailers(trailers);
  };
}

/**
 * `body` with its bytes counted into `meter`, finished once the body was handed over whole: before its
 * end is written, so that the call's record is out before the client can have the answer.
 */
async function* metered(body: AsyncIterable<Uint8Array>, meter: ResponseMeter): AsyncIterable<Uint8Array> {
  try {
    for await (const chunk of body) {
      meter.bytesOut += chunk.byteLength;
      yield chunk;
    }
  } finally {
    meter.finish();
  }
}
