import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/es/grpc/health/v1/health_pb.js";
import type { ServingState } from "./lifecycle.js";

/**
 * grpc.health.v1: the server ("") and each served service are SERVING until a stop begins, then
 * NOT_SERVING (load balancers stop sending work while running calls finish). Watch sends the status,
 * then its change, and stays open until the caller leaves or the server closes.
 */
export function createHealth(serviceNames: readonly string[], state: ServingState): ServiceImpl<typeof Health> {
  const known = new Set(["", ...serviceNames]);
  const current = () => (state.serving ? Status.SERVING : Status.NOT_SERVING);
  const statusOf = (service: string) => {
    if (!known.has(service)) throw new ConnectError(`unknown service ${service}`, Code.NotFound);
    return current();
  };
  return {
    check(req) {
      return { status: statusOf(req.service) };
    },
    async *watch(req, ctx) {
      if (!known.has(req.service)) {
        yield { status: Status.SERVICE_UNKNOWN };
      } else {
        yield { status: current() };
        if (state.serving) {
          await leftOrStopped(ctx.signal, state);
          if (!ctx.signal.aborted) yield { status: current() };
        }
      }
      await leftOrStopped(ctx.signal);
    },
    list() {
      return { statuses: Object.fromEntries([...known].filter((s) => s).map((s) => [s, { status: current() }])) };
    },
  };
}

/** Resolves when `signal` fires (the caller left, the server closes) or, given `state`, a stop begins. */
function leftOrStopped(signal: AbortSignal, state?: ServingState): Promise<void> {
  return new Promise((resolve) => {
    let unsubscribe: (() => void) | undefined;
    const done = (): void => {
      signal.removeEventListener("abort", done);
      unsubscribe?.();
      resolve();
    };
    if (signal.aborted) return done();
    signal.addEventListener("abort", done, { once: true });
    unsubscribe = state?.onStop(done);
  });
}

export { Health };
