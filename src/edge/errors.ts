import { Code, ConnectError } from "@connectrpc/connect";
import { ERROR_BODY_HEADER, HTTP_CODE_HEADER } from "../server/rest-hints.js";
import { AUTH_REALM } from "../auth/interceptor.js";

/** The mapping Connect, vanguard-go and grpc-gateway agree on. */
const HTTP_STATUS: Readonly<Record<Code, number>> = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 400,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

/** Code names as the Connect protocol spells them, used as the error `key`. */
const CODE_NAME: Readonly<Record<Code, string>> = {
  [Code.Canceled]: "canceled",
  [Code.Unknown]: "unknown",
  [Code.InvalidArgument]: "invalid_argument",
  [Code.DeadlineExceeded]: "deadline_exceeded",
  [Code.NotFound]: "not_found",
  [Code.AlreadyExists]: "already_exists",
  [Code.PermissionDenied]: "permission_denied",
  [Code.ResourceExhausted]: "resource_exhausted",
  [Code.FailedPrecondition]: "failed_precondition",
  [Code.Aborted]: "aborted",
  [Code.OutOfRange]: "out_of_range",
  [Code.Unimplemented]: "unimplemented",
  [Code.Internal]: "internal",
  [Code.Unavailable]: "unavailable",
  [Code.DataLoss]: "data_loss",
  [Code.Unauthenticated]: "unauthenticated",
};

export interface RestError {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/**
 * The REST form of any error: `{"status":"404","key":…,"args":[],"message":…}` (what R clients read
 * `message` from), or the body a handler asked for. Errors that are not ConnectErrors are internal:
 * their text stays in the server log, not in the answer.
 */
export function toRestError(err: unknown, onInternal: (err: unknown) => void): RestError {
  const ce = ConnectError.from(err);
  if (!(err instanceof ConnectError)) onInternal(err);
  const status = httpStatusOf(ce);
  const e = restError(ce.code, err instanceof ConnectError ? ce.rawMessage : "Internal error", ce.metadata.get(ERROR_BODY_HEADER), status);
  // As Connect does for its own protocol: a refusal's Retry-After (429, 503) reaches the client.
  const retryAfter = ce.metadata.get("retry-after");
  if (retryAfter !== null) e.headers["retry-after"] = retryAfter;
  return e;
}

/** The HTTP status REST answers an error with: the one a handler asked for, else the code's. */
export function httpStatusOf(err: ConnectError): number {
  return Number(err.metadata.get(HTTP_CODE_HEADER) ?? HTTP_STATUS[err.code] ?? 500);
}

/** `ok`, or the code's name as the Connect protocol spells it (`resource_exhausted`). */
export function codeName(code: Code | undefined): string {
  return code === undefined ? "ok" : (CODE_NAME[code] ?? "unknown");
}

/** An error answer; `status` overrides the code's usual status (413 for a body over the limit). */
export function restError(code: Code, message: string, customBody?: string | null, status = HTTP_STATUS[code] ?? 500): RestError {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (status === 401) headers["www-authenticate"] = `Basic realm="${AUTH_REALM}"`;
  const body = customBody ?? JSON.stringify({ status: String(status), key: CODE_NAME[code] ?? "unknown", args: [], message });
  return { status, headers, body };
}

export function errorLine(err: unknown, onInternal: (err: unknown) => void): string {
  const e = toRestError(err, onInternal);
  return `{"error":${e.body}}\n`;
}
