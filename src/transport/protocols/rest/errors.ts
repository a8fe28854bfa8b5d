import { Code, ConnectError } from "@connectrpc/connect";
import { Fault } from "../../../errors/fault.js";
import { codeName, codeStatus, faultError, faultOf, httpStatusOf } from "../../../errors/mapping.js";

export interface RestError {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/**
 * The REST form of any error: `{"status":"404","key":…,"args":[],"message":…}` (what R clients read
 * `message` from) with the status of src/errors/mapping.ts, or the body its fault carries; a fault's
 * Retry-After and authentication challenge as headers. Errors that are neither faults nor
 * ConnectErrors are internal: their text stays in the server log, not in the answer.
 */
export function toRestError(err: unknown, onInternal: (err: unknown) => void): RestError {
  const ce = err instanceof Fault ? faultError(err) : err instanceof ConnectError ? err : undefined;
  if (!ce) {
    onInternal(err);
    return restError(Code.Internal, "Internal error");
  }
  const fault = faultOf(ce);
  const status = httpStatusOf(ce);
  const custom = fault?.details.body;
  const e =
    custom === undefined
      ? restError(ce.code, ce.rawMessage, status)
      : { status, headers: { "content-type": "application/json" }, body: JSON.stringify(custom) };
  // As Connect does for its own protocol: a refusal's Retry-After (429, 503) reaches the client.
  const retryAfter = ce.metadata.get("retry-after");
  if (retryAfter !== null) e.headers["retry-after"] = retryAfter;
  if (fault?.details.challenge !== undefined) e.headers["www-authenticate"] = fault.details.challenge;
  return e;
}

/** An error answer in the usual shape; `status` overrides the code's usual status (405, 408). */
export function restError(code: Code, message: string, status = codeStatus(code)): RestError {
  const body = JSON.stringify({ status: String(status), key: codeName(code), args: [], message });
  return { status, headers: { "content-type": "application/json" }, body };
}

export function errorLine(err: unknown, onInternal: (err: unknown) => void): string {
  const e = toRestError(err, onInternal);
  return `{"error":${e.body}}\n`;
}
