import type { Interceptor } from "@connectrpc/connect";
import { Fault } from "../errors/fault.js";
import { faultError, toConnectError } from "../errors/mapping.js";
import { onStreamEnd } from "./stream-end.js";

/**
 * Faults raised by what runs inside it (interceptors after it, handlers, the domain) become the
 * ConnectErrors of their kinds, for every protocol: Connect-ES, the unary fast path and the REST
 * edge run the same chain, and Connect-ES would answer anything but a ConnectError INTERNAL. A
 * stream's fault is converted when it is raised, after messages may have gone out.
 */
export const faultConversion: Interceptor = (next) => async (req) => {
  try {
    const res = await next(req);
    if (!res.stream) return res;
    return {
      ...res,
      message: onStreamEnd(res.message, (how) =>
        how !== undefined && how !== "gaveUp" && how.error instanceof Fault ? faultError(how.error) : undefined,
      ),
    };
  } catch (error) {
    throw toConnectError(error);
  }
};
