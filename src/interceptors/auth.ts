import type { Interceptor } from "@connectrpc/connect";
import { getOption, hasOption, type DescMethod } from "@bufbuild/protobuf";
import { access as accessOption, type Access } from "../../gen/es/rock/options/v1/access_pb.js";
import { Fault } from "../errors/fault.js";
import { parseBasic, unauthenticated } from "../auth/basic.js";
import { callerKey, clientAddressKey, type Caller } from "../auth/caller.js";
import type { UserDirectory } from "../auth/users.js";

/** Who a call from an open network is (auth.securityEnabled false): the R service's roles, not the catalogue's. */
const OPEN_CALLER: Caller = { name: "anonymous", roles: new Set(["administrator", "manager", "user"]) };

/** Methods without the option (reflection, health) are public; the option is read once per method. */
const accessCache = new WeakMap<DescMethod, Access | undefined>();
function accessOf(method: DescMethod): Access | undefined {
  if (!accessCache.has(method)) {
    accessCache.set(method, hasOption(method, accessOption) ? getOption(method, accessOption) : undefined);
  }
  return accessCache.get(method);
}

/**
 * Authentication (HTTP Basic, also as gRPC metadata) and the role rules of the `access` option, for
 * every protocol: the Connect router runs it for gRPC, gRPC-Web and Connect, the REST edge for REST.
 * Malformed Basic credentials are refused even on public methods: they are never taken as anonymous.
 */
export function authInterceptor(users: UserDirectory, open?: (clientAddress: string | undefined) => boolean): Interceptor {
  return (next) => async (req) => {
    const access = accessOf(req.method);
    const isPublic = !access || access.public;
    const credentials = parseBasic(req.header.get("authorization"));
    if (open?.(req.contextValues.get(clientAddressKey))) {
      // auth.securityEnabled false, and the client in auth.openNetworks: whatever it sends (Opal's pods
      // send credentials of their own), it is the R service's administrator; the roles still apply.
      req.contextValues.set(callerKey, OPEN_CALLER);
    } else if (credentials) {
      const caller = await users.authenticate(credentials.name, credentials.password, req.contextValues.get(clientAddressKey));
      if (caller) req.contextValues.set(callerKey, caller);
      else if (!isPublic) throw unauthenticated("Bad credentials");
    }
    if (isPublic) return next(req);
    const caller = req.contextValues.get(callerKey);
    if (!caller) throw unauthenticated("Authentication required");
    if (access.roles.length > 0 && !access.roles.some((r) => caller.roles.has(r))) {
      const message = `${req.method.name} requires one of the roles: ${access.roles.join(", ")}`;
      throw access.refuseUnauthenticated ? unauthenticated(message) : new Fault("forbidden", message);
    }
    return next(req);
  };
}
