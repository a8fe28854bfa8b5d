import { statSync } from "node:fs";
import type { Owner } from "../confine/as-owner.js";
import { installedPackages } from "./publish.js";

/** Shares packages installed into a session's library: copies `names` from `library` (read as `owner`). */
export type ShareInstalls = (library: string, names: readonly string[], owner: Owner | undefined) => Promise<unknown>;

/**
 * The installs of a session whose owner may install for everyone (packages.sessionInstalls `auto`, an
 * administrator or a manager): after each of its runs, what it installed into its own library goes on
 * into the service's, before the call answers, so that every session opened after that answer loads
 * it. What was in the library when this began counts as shared (a session restored after a restart
 * shared it then).
 */
export class SharedInstalls {
  private stamp: string;
  private readonly known: Map<string, string>;

  constructor(
    private readonly library: string,
    private readonly share: ShareInstalls,
  ) {
    this.stamp = folderStamp(library);
    this.known = installedPackages(library);
  }

  /**
   * Undefined when the library folder did not change since the last look (one stat: this runs after
   * every evaluation), else the sharing of what was installed since.
   */
  after(owner: Owner | undefined): Promise<void> | undefined {
    const stamp = folderStamp(this.library);
    if (stamp === this.stamp) return undefined;
    this.stamp = stamp;
    const installed = installedPackages(this.library);
    const fresh = [...installed].filter(([name, install]) => this.known.get(name) !== install);
    if (fresh.length === 0) return undefined;
    return this.share(
      this.library,
      fresh.map(([name]) => name),
      owner,
    ).then(
      () => {
        for (const [name, install] of fresh) this.known.set(name, install);
      },
      (error: unknown) => {
        // Tried again after the next run.
        this.stamp = "";
        throw error;
      },
    );
  }
}

/** A folder's entries changed when this did (R installs a package by renaming it into the library). */
function folderStamp(folder: string): string {
  try {
    const info = statSync(folder);
    return `${info.ino}:${info.mtimeMs}`;
  } catch {
    return "";
  }
}
