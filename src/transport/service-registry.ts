import type { DescService } from "@bufbuild/protobuf";
import {
  createServiceImplSpec,
  type ConnectRouter,
  type MethodImplSpec,
  type ServiceImpl,
  type ServiceImplSpec,
} from "@connectrpc/connect";

/** JSON conventions of one service's REST answers (the two contracts differ). */
export interface RestStyle {
  /** Emit fields with default values (the R service's contract shows them always). */
  readonly alwaysEmitImplicit: boolean;
}

/**
 * A service as the server knows it: the descriptor, each method's implementation, and how its REST
 * answers look. The same list feeds the Connect router, the unary fast path and the REST edge, so all
 * call the same handlers.
 */
export interface RegisteredService {
  readonly desc: DescService;
  readonly spec: ServiceImplSpec;
  readonly rest: RestStyle;
}

/** `impl` is whole: a service missing a handler does not compile (rather than answer UNIMPLEMENTED). */
export function registerService<S extends DescService>(desc: S, impl: ServiceImpl<S>, rest: RestStyle): RegisteredService {
  return { desc, spec: createServiceImplSpec(desc, impl), rest };
}

/** The service with each method's implementation replaced by what `wrap` makes of it (e.g. passing calls on to another node). */
export function wrapMethods(service: RegisteredService, wrap: (method: MethodImplSpec) => MethodImplSpec): RegisteredService {
  const methods = Object.fromEntries(Object.entries(service.spec.methods).map(([name, m]) => [name, wrap(m)]));
  return { ...service, spec: { service: service.spec.service, methods } };
}

/** Every method of the service on a Connect router. */
export function routeMethods(router: ConnectRouter, service: RegisteredService): void {
  for (const m of Object.values(service.spec.methods)) {
    switch (m.kind) {
      case "unary":
        router.rpc(m.method, m.impl);
        break;
      case "server_streaming":
        router.rpc(m.method, m.impl);
        break;
      case "client_streaming":
        router.rpc(m.method, m.impl);
        break;
      case "bidi_streaming":
        router.rpc(m.method, m.impl);
        break;
    }
  }
}
