import { Code } from "@connectrpc/connect";
import { Registry } from "prom-client";
import { parseBasic, unauthenticated } from "../auth/basic.js";
import type { UserDirectory } from "../auth/users.js";
import { restError, toRestError, type RestError } from "../transport/protocols/rest/errors.js";
import { Fault } from "../errors/fault.js";
import type { RequestHandler, ServerRequest, ServerResponse } from "../transport/http.js";

/** The registry of a service that keeps no metrics (`metrics.enabled: false`): /metrics is then not served. */
export const METRICS_OFF = new Registry();

/** Who may read /metrics: they show the service's load and its users' activity. */
const METRICS_ROLES = ["administrator", "manager"];

/**
 * GET /metrics (Prometheus text format) in front of `next`. Not an RPC, so the interceptors do not
 * run: the same user directory checks the Basic credentials, with its failure throttle.
 */
export function metricsResource(
  registry: Registry,
  users: UserDirectory,
  clientAddress: (req: ServerRequest) => string | undefined,
  onInternalError: (err: unknown) => void,
): ReadonlyMap<string, RequestHandler> {
  if (registry === METRICS_OFF) return new Map();
  const handler: RequestHandler = (req, res) => {
    if (req.method !== "GET") {
      return send(res, restError(Code.Unimplemented, `Method ${req.method} is not allowed here`, 405), { allow: "GET" });
    }
    authorize(req.headers.authorization, clientAddress(req), users)
      .then(() => registry.metrics())
      .then(
        (text) => {
          res.writeHead(200, {
            "content-type": registry.contentType,
            "content-length": String(Buffer.byteLength(text)),
            "cache-control": "no-store",
          });
          res.end(text);
        },
        (err: unknown) => send(res, toRestError(err, onInternalError)),
      );
  };
  return new Map([["/metrics", handler]]);
}

async function authorize(header: string | undefined, clientAddress: string | undefined, users: UserDirectory): Promise<void> {
  const credentials = parseBasic(header ?? null);
  if (!credentials) throw unauthenticated("Authentication required");
  const caller = await users.authenticate(credentials.name, credentials.password, clientAddress);
  if (!caller) throw unauthenticated("Bad credentials");
  if (!METRICS_ROLES.some((r) => caller.roles.has(r))) {
    throw new Fault("forbidden", `/metrics requires one of the roles: ${METRICS_ROLES.join(", ")}`);
  }
}

function send(res: ServerResponse, e: RestError, extra: Record<string, string> = {}): void {
  res.writeHead(e.status, { ...e.headers, ...extra, "content-length": String(Buffer.byteLength(e.body)) });
  res.end(e.body);
}
