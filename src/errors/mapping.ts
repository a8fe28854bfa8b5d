import { Code, ConnectError } from "@connectrpc/connect";
import { Fault, type FaultKind } from "./fault.js";

/**
 * The one table of what each kind of fault answers: its gRPC code (gRPC, gRPC-Web, Connect) and its
 * HTTP status (REST). Where a kind's status is not its code's usual one (413, 415, 429 beside 400
 * and RESOURCE_EXHAUSTED), only REST tells them apart.
 */
export const FAULT_ANSWERS: Readonly<Record<FaultKind, { readonly code: Code; readonly status: number }>> = {
  invalid: { code: Code.InvalidArgument, status: 400 },
  unsupported_media: { code: Code.InvalidArgument, status: 415 },
  precondition: { code: Code.FailedPrecondition, status: 400 },
  unauthenticated: { code: Code.Unauthenticated, status: 401 },
  forbidden: { code: Code.PermissionDenied, status: 403 },
  not_found: { code: Code.NotFound, status: 404 },
  conflict: { code: Code.AlreadyExists, status: 409 },
  too_large: { code: Code.ResourceExhausted, status: 413 },
  limit: { code: Code.ResourceExhausted, status: 429 },
  canceled: { code: Code.Canceled, status: 499 },
  internal: { code: Code.Internal, status: 500 },
  unavailable: { code: Code.Unavailable, status: 503 },
  deadline: { code: Code.DeadlineExceeded, status: 504 },
};

/**
 * The HTTP status of an error that is not a fault (Connect's own, the transports'): the mapping
 * Connect, vanguard-go and grpc-gateway agree on.
 */
const CODE_STATUS: Readonly<Record<Code, number>> = {
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

/** Code names as the Connect protocol spells them: the REST error `key`, the log's `code`. */
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

/**
 * The ConnectError every protocol answers a fault with: its message verbatim, its kind's code, a
 * Retry-After as metadata (Connect sends it as a header or trailer), the fault itself as `cause`
 * (where the REST edge reads its status, body and challenge from).
 */
export function faultError(fault: Fault): ConnectError {
  const { retryAfterSeconds } = fault.details;
  const metadata = retryAfterSeconds === undefined ? undefined : { "retry-after": String(retryAfterSeconds) };
  return new ConnectError(fault.message, FAULT_ANSWERS[fault.kind].code, metadata, undefined, fault);
}

/** A fault as its ConnectError; anything else as it is. */
export function toConnectError(err: unknown): unknown {
  return err instanceof Fault ? faultError(err) : err;
}

/** The fault an error is or was made from. */
export function faultOf(err: unknown): Fault | undefined {
  if (err instanceof Fault) return err;
  return err instanceof ConnectError && err.cause instanceof Fault ? err.cause : undefined;
}

/** The HTTP status REST answers an error with: its fault's, else its code's usual one. */
export function httpStatusOf(err: ConnectError): number {
  const fault = faultOf(err);
  return fault ? FAULT_ANSWERS[fault.kind].status : codeStatus(err.code);
}

/** The usual HTTP status of a code. */
export function codeStatus(code: Code): number {
  return CODE_STATUS[code] ?? 500;
}

/** The code an error answers with; anything neither a ConnectError nor a fault is internal. */
export function codeOf(err: unknown): Code {
  if (err instanceof Fault) return FAULT_ANSWERS[err.kind].code;
  return err instanceof ConnectError ? err.code : Code.Internal;
}

/** `ok`, or the code's name as the Connect protocol spells it (`resource_exhausted`). */
export function codeName(code: Code | undefined): string {
  return code === undefined ? "ok" : (CODE_NAME[code] ?? "unknown");
}
