import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/es/grpc/health/v1/health_pb.js";

/**
 * grpc.health.v1: the server ("") and each served service are SERVING while the process serves;
 * Watch sends the status and stays open until the caller leaves or the server stops.
 */
export function createHealth(serviceNames: readonly string[]): ServiceImpl<typeof Health> {
  const known = new Set(["", ...serviceNames]);
  const statusOf = (service: string) => {
    if (!known.has(service)) throw new ConnectError(`unknown service ${service}`, Code.NotFound);
    return Status.SERVING;
  };
  return {
    check(req) {
      return { status: statusOf(req.service) };
    },
    async *watch(req, ctx) {
      yield { status: known.has(req.service) ? Status.SERVING : Status.SERVICE_UNKNOWN };
      await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
    },
    list() {
      return { statuses: Object.fromEntries([...known].filter((s) => s).map((s) => [s, { status: Status.SERVING }])) };
    },
  };
}

export { Health };
