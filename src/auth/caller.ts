import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { unauthenticated } from "./basic.js";

/** The authenticated user behind a call, whatever protocol it came over. */
export interface Caller {
  readonly name: string;
  readonly roles: ReadonlySet<string>;
}

/** Set by the auth interceptor on every authenticated call; undefined on public RPCs without credentials. */
export const callerKey = createContextKey<Caller | undefined>(undefined, { description: "authenticated caller" });

/**
 * The client's address as the server's socket has it, set by each protocol's edge; never taken from a
 * header, which a client could set to anything. Failed logins are counted by it.
 */
export const clientAddressKey = createContextKey<string | undefined>(undefined, { description: "client address" });

/** The caller of a call whose RPC requires authentication (the interceptor has already refused anonymous calls). */
export function callerOf(ctx: HandlerContext): Caller {
  const caller = ctx.values.get(callerKey);
  if (!caller) throw unauthenticated("Authentication required");
  return caller;
}

export function hasAnyRole(caller: Caller, roles: readonly string[]): boolean {
  return roles.some((r) => caller.roles.has(r));
}
