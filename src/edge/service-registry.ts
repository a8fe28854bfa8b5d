import type { DescService } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";

/** JSON conventions of one service's REST answers (the two contracts differ). */
export interface RestStyle {
  /** Emit fields with default values (the R service's contract shows them always). */
  readonly alwaysEmitImplicit: boolean;
}

/**
 * A service as the server knows it: the descriptor, the implementation, and how its REST answers look.
 * The same list feeds the Connect router and the REST edge, so both call the same handlers.
 */
export interface RegisteredService {
  readonly desc: DescService;
  readonly impl: Partial<ServiceImpl<DescService>>;
  readonly rest: RestStyle;
}

/** `impl` is whole: a service missing a handler does not compile (rather than answer UNIMPLEMENTED). */
export function registerService<S extends DescService>(desc: S, impl: ServiceImpl<S>, rest: RestStyle): RegisteredService {
  return { desc, impl: impl as Partial<ServiceImpl<DescService>>, rest };
}
