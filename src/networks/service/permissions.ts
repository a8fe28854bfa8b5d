import type { Caller } from "../../auth/caller.js";

/** Reference §2.4: what each catalogue role may do to a document. */

export const ADMINISTRATOR = "catalog-administrator";
export const REVIEWER = "catalog-reviewer";
export const EDITOR = "catalog-editor";
export const CATALOG_ROLES = [ADMINISTRATOR, REVIEWER, EDITOR] as const;

export interface DocumentPermissions {
  readonly view: boolean;
  readonly edit: boolean;
  readonly delete: boolean;
  readonly publish: boolean;
}

export const NO_PERMISSIONS: DocumentPermissions = { view: false, edit: false, delete: false, publish: false };

/** What a share key gives a caller without a catalogue role. */
export const VIEW_ONLY: DocumentPermissions = { ...NO_PERMISSIONS, view: true };

export function permissionsOf(caller: Caller): DocumentPermissions {
  if (caller.roles.has(ADMINISTRATOR) || caller.roles.has(REVIEWER)) return { view: true, edit: true, delete: true, publish: true };
  if (caller.roles.has(EDITOR)) return { view: true, edit: true, delete: false, publish: false };
  return NO_PERMISSIONS;
}
