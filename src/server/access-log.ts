import { UNROUTED, type CallRecord } from "../interceptors/call-observer.js";
import type { Logger } from "./logger.js";

/**
 * One `call` line per finished call. A call refused for a limit (429: sessions, throttled logins, a
 * body too large, a full password queue) is a warning, so that `log.level: warn` still shows limits hit.
 */
export function accessLog(logger: Logger): (record: CallRecord) => void {
  return (r) => {
    const fields = {
      rpc: r.service === UNROUTED ? UNROUTED : `${r.service}/${r.method}`,
      request: r.request,
      protocol: r.protocol,
      status: r.httpStatus ?? r.code,
      durationMs: r.durationMs,
      user: r.user,
      session: r.sessionId,
      bytesIn: r.bytesIn,
      bytesOut: r.bytesOut,
    };
    if (r.code === "resource_exhausted") logger.warn("call refused: limit reached", fields);
    else logger.info("call", fields);
  };
}
