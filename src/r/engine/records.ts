import { mkdirSync } from "node:fs";
import { readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { CommandsRecord } from "../session/commands.js";

/**
 * What the service keeps of a session whose state its process saved: who it is, its dates, its
 * commands. Written by Node into a folder of the service's own (0700), never in the session's home,
 * which the session's uid owns and could write anything into.
 */
export interface SessionRecord {
  readonly id: string;
  readonly subject: string;
  readonly createdAt: string;
  readonly lastAccess: string;
  /** When the state file was written whole. */
  readonly savedAt: string;
  /** The state file's size when it was saved. */
  readonly stateBytes: number;
  /** What could not be saved, as R named it. */
  readonly lost: readonly string[];
  readonly commands: CommandsRecord;
  /** Its owner may install packages for every session (packages.sessionInstalls). */
  readonly installsForAll?: boolean;
}

const SUFFIX = ".json";

/** Session records, one JSON file each in `<dataDir>/r-sessions`, each replaced whole (written beside, renamed). */
export class SessionRecords {
  constructor(private readonly dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }

  async write(record: SessionRecord): Promise<void> {
    const file = this.fileOf(record.id);
    const temp = `${file}.tmp`;
    await writeFile(temp, JSON.stringify(record), { mode: 0o600 });
    await rename(temp, file);
  }

  async remove(id: string): Promise<void> {
    await rm(this.fileOf(id), { force: true });
  }

  /**
   * Every whole record. A file that is not one (the host lost power mid-write, a person's edit) is
   * removed: its session is then ended with the others that have no saved state, and said.
   */
  async readAll(): Promise<SessionRecord[]> {
    const records: SessionRecord[] = [];
    for (const name of await readdir(this.dir)) {
      const file = join(this.dir, name);
      if (!name.endsWith(SUFFIX)) {
        await rm(file, { force: true, recursive: true });
        continue;
      }
      try {
        records.push(recordOf(JSON.parse(await readFile(file, "utf8")), name.slice(0, -SUFFIX.length)));
      } catch {
        await rm(file, { force: true });
      }
    }
    return records;
  }

  private fileOf(id: string): string {
    return join(this.dir, `${id}${SUFFIX}`);
  }
}

/** The record in `value`, checked field by field against the file's name. */
function recordOf(value: unknown, id: string): SessionRecord {
  if (typeof value !== "object" || value === null) throw new Error("not an object");
  const r = value as Record<string, unknown>;
  const text = (key: string): string => {
    if (typeof r[key] !== "string") throw new Error(`${key} is not a text`);
    return r[key];
  };
  const date = (key: string): string => {
    const t = text(key);
    if (Number.isNaN(Date.parse(t))) throw new Error(`${key} is not a date`);
    return t;
  };
  if (text("id") !== id) throw new Error("its id is not its file's name");
  const commands = r.commands as CommandsRecord | undefined;
  if (typeof commands !== "object" || commands === null || !Array.isArray(commands.entries) || typeof commands.next !== "number") {
    throw new Error("commands are not a list");
  }
  return {
    id,
    subject: text("subject"),
    createdAt: date("createdAt"),
    lastAccess: date("lastAccess"),
    savedAt: date("savedAt"),
    stateBytes: typeof r.stateBytes === "number" ? r.stateBytes : 0,
    lost: Array.isArray(r.lost) ? r.lost.map(String) : [],
    commands,
    installsForAll: r.installsForAll === true,
  };
}
