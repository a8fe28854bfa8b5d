import { Code, ConnectError } from "@connectrpc/connect";
import type { CallKernel } from "../../call/call-kernel.js";
import { pathOf, type ServerRequest, type ServerResponse } from "../../http.js";
import { writeError } from "./rpc-answer.js";
import type { Wire } from "./wire.js";

/**
 * A gRPC or gRPC-Web call of no RPC this server has: UNIMPLEMENTED in the call's own protocol (REST
 * would answer an HTTP 404), reported refused, as a call no interceptor saw.
 */
export function answerUnknownMethod(req: ServerRequest, res: ServerResponse, wire: Wire, kernel: CallKernel): void {
  const started = performance.now();
  req.resume();
  const bytesOut = writeError(
    res,
    wire,
    new Headers(),
    new Headers(),
    new ConnectError(`${pathOf(req.url)} is not implemented`, Code.Unimplemented),
  );
  kernel.refuse(req, { method: undefined, protocol: wire.name, code: Code.Unimplemented, httpStatus: undefined, started, bytesOut });
}
