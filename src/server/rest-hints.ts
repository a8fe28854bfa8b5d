import { ConnectError, Code, type HandlerContext } from "@connectrpc/connect";

/**
 * How a handler shapes the REST answer without knowing the protocol: response headers that the REST
 * edge turns into the HTTP status, the Location header and an error body. Over gRPC and Connect they
 * are harmless response metadata.
 */
export const HTTP_CODE_HEADER = "x-http-code";
export const LOCATION_HEADER = "location";
export const ERROR_BODY_HEADER = "x-error-body";

/** Ask for a success status other than 200 (201 Created, 204 No Content). */
export function setHttpStatus(ctx: HandlerContext, status: 201 | 204): void {
  ctx.responseHeader.set(HTTP_CODE_HEADER, String(status));
}

/** 201 Created with a Location; `path` is absolute on this server (e.g. `/r/session/<id>`). */
export function setCreated(ctx: HandlerContext, path: string): void {
  setHttpStatus(ctx, 201);
  ctx.responseHeader.set(LOCATION_HEADER, path);
}

/** An error whose REST body is exactly `body` (e.g. 409 `{"network":[…]}`) instead of the default shape. */
export function errorWithBody(code: Code, message: string, body: unknown): ConnectError {
  return new ConnectError(message, code, { [ERROR_BODY_HEADER]: JSON.stringify(body) });
}

/** How long a client told to come back later is asked to wait. */
const RETRY_AFTER_SECONDS = 5;

/** 503 UNAVAILABLE with Retry-After: a passing state (R starting, the service stopping), not a fault. */
export function retryLater(message: string): ConnectError {
  return new ConnectError(`${message}; retry in ${RETRY_AFTER_SECONDS} s`, Code.Unavailable, { "retry-after": String(RETRY_AFTER_SECONDS) });
}

export { Code, ConnectError };
