import { getOption, hasOption, type DescMethod } from "@bufbuild/protobuf";
import { access as accessOption } from "../../gen/es/rock/options/v1/access_pb.js";
import type { SecurityRequirement } from "./types.js";

export const BASIC_AUTH = "basicAuth";

export interface AccessRule {
  readonly isPublic: boolean;
  /** One of them is needed; empty: any authenticated caller. */
  readonly roles: readonly string[];
  /** A caller without one of the roles gets 401, not 403 (the contract of the index rebuilds). */
  readonly refuseUnauthenticated: boolean;
}

/** The `access` option as the auth interceptor reads it: a method without one is public. */
export function accessRule(method: DescMethod): AccessRule {
  if (!hasOption(method, accessOption)) return { isPublic: true, roles: [], refuseUnauthenticated: false };
  const access = getOption(method, accessOption);
  return { isPublic: access.public, roles: access.roles, refuseUnauthenticated: access.refuseUnauthenticated };
}

/**
 * Security requirements are alternatives: one per role, since any one of the roles suffices. A public
 * method requires nothing (the empty requirement), yet credentials sent to it still identify the
 * caller, which a handler may use (a network opens to its catalogue roles): so Basic is offered too.
 */
export function securityOf(rule: AccessRule): SecurityRequirement[] {
  if (rule.isPublic) return [{}, { [BASIC_AUTH]: [] }];
  return rule.roles.length === 0 ? [{ [BASIC_AUTH]: [] }] : rule.roles.map((role) => ({ [BASIC_AUTH]: [role] }));
}

export function accessText(rule: AccessRule): string {
  if (rule.isPublic) return "**Public**: callable without credentials.";
  if (rule.roles.length === 0)
    return "**Any authenticated user**; the handler decides what the caller may see or change (owner, catalogue roles).";
  const roles = `**Roles**: ${rule.roles.map((r) => `\`${r}\``).join(" or ")}.`;
  return rule.refuseUnauthenticated ? `${roles} A caller without one is refused 401, as the contract says, not 403.` : roles;
}
