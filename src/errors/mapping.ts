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
 * Each code's usual HTTP status, for an error that is not a fault (Connect's own, the transports'):
 * the mapping Connect, vanguard-go and grpc-gateway agree on; and its name as the Connect protocol
 * spells it (the REST error `key`, the log's `code`).
 */
const CODES: Readonly<Record<Code, { readonly status: number; readonly name: string }>> = {
  [Code.Canceled]: { status: 499, name: "canceled" },
  [Code.Unknown]: { status: 500, name: "unknown" },
  [Code.InvalidArgument]: { status: 400, name: "invalid_argument" },
  [Code.DeadlineExceeded]: { status: 504, name: "deadline_exceeded" },
  [Code.NotFound]: { status: 404, name: "not_found" },
  [Code.AlreadyExists]: { status: 409, name: "already_exists" },
  [Code.PermissionDenied]: { status: 403, name: "permission_denied" },
  [Code.ResourceExhausted]: { status: 429, name: "resource_exhausted" },
  [Code.FailedPrecondition]: { status: 400, name: "failed_precondition" },
  [Code.Aborted]: { status: 409, name: "aborted" },
  [Code.OutOfRange]: { status: 400, name: "out_of_range" },
  [Code.Unimplemented]: { status: 501, name: "unimplemented" },
  [Code.Internal]: { status: 500, name: "internal" },
  [Code.Unavailable]: { status: 503, name: "unavailable" },
  [Code.DataLoss]: { status: 500, name: "data_loss" },
  [Code.Unauthenticated]: { status: 401, name: "unauthenticated" },
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
  return CODES[code]?.status ?? 500;
}

/** The code an error answers with; anything neither a ConnectError nor a fault is internal. */
export function codeOf(err: unknown): Code {
  if (err instanceof Fault) return FAULT_ANSWERS[err.kind].code;
  return err instanceof ConnectError ? err.code : Code.Internal;
}

/** `ok`, or the code's name as the Connect protocol spells it (`resource_exhausted`). */
export function codeName(code: Code | undefined): string {
  return code === undefined ? "ok" : (CODES[code]?.name ?? "unknown");
}
