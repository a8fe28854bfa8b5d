import type { Owner } from "../confine/as-owner.js";
import type { RChild } from "../process/child.js";

/**
 * A session's folders: `work` (its working directory), `tmp` (its tempdir()) and `library` (the
 * package library it installs into, first in its `.libPaths()`, when packages.sessionInstalls allows
 * installs), all inside `home`.
 */
export interface SessionFolders {
  readonly home: string;
  readonly work: string;
  readonly tmp: string;
  readonly library: string;
  /** The file its state is saved into by its own process (src/r/process/session-state.R), in `home`. */
  readonly state: string;
}

/** A session's folders as its process sees them now. */
export interface SessionDirs extends SessionFolders {
  /** Who owns them when the session is isolated: file operations in them run as that uid. */
  readonly owner?: Owner;
}

/** A process of a session: the R process forked for it, its uid when isolated. */
export interface SessionProcess {
  readonly child: RChild;
  readonly owner?: Owner;
}
