/**
 * What can go wrong, as the domain says it: a kind, a message for the client, and what some kinds
 * carry. It knows no protocol; src/errors/mapping.ts gives each kind its gRPC code and HTTP status.
 */
export type FaultKind =
  /** The request is wrong: an argument, a path, the caller's R code (400). */
  | "invalid"
  /** The body's media type is not the one the operation reads (415). */
  | "unsupported_media"
  /** The server is not set up for what was asked (a configured value it cannot use) (400). */
  | "precondition"
  /** No credentials, or wrong ones (401). */
  | "unauthenticated"
  /** The caller may not do this (403). */
  | "forbidden"
  /** What the request names does not exist (404). */
  | "not_found"
  /** It exists already, or something else still refers to it (409). */
  | "conflict"
  /** A body or upload over its limit (413). */
  | "too_large"
  /** A limit of the caller's or the server's is reached: sessions, failed logins (429). */
  | "limit"
  /** The caller cancelled before the end (499). */
  | "canceled"
  /** The server could not do it: R is not running, the session ended under the call, R failed (500). */
  | "internal"
  /** A passing state (R starting, the service stopping): come back later (503). */
  | "unavailable"
  /** An operation ran past its time limit (504). */
  | "deadline";

export interface FaultDetails {
  /** The REST answer's body, instead of the usual error shape (409 `{"network":[…]}`). */
  readonly body?: unknown;
  /** How long the client should wait before it tries again (Retry-After). */
  readonly retryAfterSeconds?: number;
  /** The authentication challenge of a 401 (WWW-Authenticate), for the protocols that send one. */
  readonly challenge?: string;
}

export class Fault extends Error {
  constructor(
    readonly kind: FaultKind,
    message: string,
    readonly details: FaultDetails = {},
  ) {
    super(message);
    this.name = "Fault";
  }
}

/** How long a client told to come back later is asked to wait. */
const RETRY_AFTER_SECONDS = 5;

/** 503 with Retry-After: a passing state (R starting, the service stopping), not a fault of the server. */
export function retryLater(message: string): Fault {
  return new Fault("unavailable", `${message}; retry in ${RETRY_AFTER_SECONDS} s`, { retryAfterSeconds: RETRY_AFTER_SECONDS });
}
