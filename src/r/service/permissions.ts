import { getOption } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { access } from "../../../gen/es/rock/options/v1/access_pb.js";
import { RService } from "../../../gen/es/rock/r/v1/rservice_pb.js";
import { Fault } from "../../errors/fault.js";
import { callerOf, hasAnyRole } from "../../auth/caller.js";
import type { REngine } from "../engine/engine.js";
import type { RSession } from "../session/session.js";

/** The `access` option says who may call an RPC; these say who may act on a session another user owns. */

export const ADMINISTRATOR = "administrator";
export const MANAGER = "manager";

/** Who may look at or end a session besides its owner. */
export const SESSION_READERS = [ADMINISTRATOR, MANAGER] as const;
/** Who may evaluate, exchange files or handle commands in a session besides its owner. */
export const SESSION_USERS = [ADMINISTRATOR] as const;

/**
 * Who may install packages through the API (InstallPackage's `access` option): from a session of
 * theirs, they install for every session too (packages.sessionInstalls `auto`).
 */
export const PACKAGE_INSTALLERS: readonly string[] = getOption(RService.method.installPackage, access).roles;

/** The session, when it exists (404) and the caller owns it or has one of `roles` (403). */
export function sessionFor(engine: REngine, ctx: HandlerContext, id: string, roles: readonly string[]): RSession {
  const session = engine.session(id);
  checkAccess(ctx, id, session.subject, roles);
  return session;
}

/** Throws 403 unless the caller is `owner`, the owner of session `id`, or has one of `roles`. */
export function checkAccess(ctx: HandlerContext, id: string, owner: string, roles: readonly string[]): void {
  const caller = callerOf(ctx);
  if (owner !== caller.name && !hasAnyRole(caller, roles)) {
    throw new Fault("forbidden", `Not allowed to access R session: ${id}`);
  }
}
