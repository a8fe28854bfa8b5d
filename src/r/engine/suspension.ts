import { statfsSync } from "node:fs";
import { lstat } from "node:fs/promises";
import type { RConfig } from "../../config/config.js";
import { CommandList } from "../session/commands.js";
import { sessionNotResumed } from "./faults.js";
import { restoreFrame } from "../wire/protocol.js";
import type { RServerProcess } from "../process/rserver.js";
import type { SessionProcess } from "../session/home.js";
import type { SessionHost, SessionLife, SessionStart } from "../session/life.js";
import type { EngineEvent } from "./events.js";
import { processOf, type Fork, type SessionHomes } from "./homes.js";
import type { SessionRecord, SessionRecords } from "./records.js";

export interface SuspensionOptions {
  readonly config: RConfig;
  readonly homes: SessionHomes;
  readonly records: SessionRecords;
  /** The running R server, waited for while it starts (as any call waits). */
  readonly server: () => Promise<RServerProcess>;
  /** Makes a uid free when none is (a spare holds it): a session coming back takes it. */
  readonly freeUid: () => Promise<void>;
  /** The open sessions, suspended ones included. */
  readonly sessions: () => readonly SessionLife[];
  /** A session's process changed (undefined: it has none): the engine counts its group's usage. */
  readonly onProcess: (id: string, fork: Fork | undefined) => void;
  /** A session's uid (or its place among the sessions) is free again. */
  readonly freed: () => void;
  readonly emit: (event: EngineEvent) => void;
  /** The saved states' disk, all sessions together, in bytes; <= 0: no cap. */
  readonly maxBytes: number;
}

/** A command that had not finished when the service stopped or crashed. */
export const UNFINISHED = "The R service stopped before this command finished";

/**
 * Sessions that outlive their process: how a session's process is brought back from its saved state
 * and given up after a save (each session's SessionHost), when sessions are checkpointed and
 * suspended (the sweep), the records that let a later run of the service list them again, and the
 * cap on the disk their states take.
 */
export class Suspension {
  /** Each saved state's size, for the disk cap. */
  private readonly stateBytes = new Map<string, number>();
  /** What the last save of each session could not save, said when it is suspended. */
  private readonly lost = new Map<string, readonly string[]>();
  /** When a session's last save failed: the sweep tries again one idle period later. */
  private readonly failedAt = new Map<string, number>();

  constructor(private readonly options: SuspensionOptions) {}

  /** What session `id` of `subject` starts from and goes back to; `fork`: its first process (none: suspended). */
  host(id: string, subject: string, fork: Fork | undefined): SessionHost {
    const { homes, records, emit } = this.options;
    const folders = homes.folders(id);
    let current = fork;
    if (fork) this.options.onProcess(id, fork);
    // What a session's process holds (its uid, its group): the fork it came from.
    const held = (process: SessionProcess | undefined) => current ?? { id, dirs: folders, uid: undefined, child: process?.child };
    return {
      resume: async () => {
        const started = Date.now();
        const server = await this.options.server();
        if (homes.available === 0) await this.options.freeUid();
        const resumed = await homes.resume(server, id);
        const outcome = await resumed.child.run(restoreFrame(folders.state));
        if (!outcome.ok) {
          const why = outcome.ended
            ? (resumed.quota?.endedBy() ??
              "its new process ended while it restored its state (the R server's log, GET /rserver/_log, says why)")
            : outcome.error;
          await homes.suspend(resumed);
          emit({ kind: "session-resume-failed", id, user: subject, error: why });
          throw sessionNotResumed(id, why);
        }
        current = resumed;
        this.options.onProcess(id, resumed);
        emit({ kind: "session-resumed", id, user: subject, ms: Date.now() - started });
        return processOf(resumed);
      },
      release: async (process) => {
        const gone = held(process);
        current = undefined;
        this.options.onProcess(id, undefined);
        await homes.suspend(gone);
        this.options.freed();
      },
      saved: async (session, lost) => {
        const bytes = (await lstat(folders.state)).size;
        this.stateBytes.set(id, bytes);
        this.lost.set(id, lost);
        this.failedAt.delete(id);
        await records.write(recordOf(session, bytes, lost));
      },
      dispose: async (process) => {
        const gone = held(process);
        current = undefined;
        this.options.onProcess(id, undefined);
        this.forget(id);
        await homes.dispose(gone, () => records.remove(id));
        this.options.freed();
      },
    };
  }

  /** Suspends `session` (see SessionLife.suspend), saying so; `why`: what asked. */
  async suspend(session: SessionLife, why: "idle" | "asked" | "stop"): Promise<void> {
    const started = Date.now();
    try {
      if (why === "stop") await session.shutDown(new Error(UNFINISHED));
      else await session.suspend();
    } catch (error) {
      this.failed(session, error);
      throw error;
    }
    if (!session.suspended) return;
    this.options.emit({
      kind: "session-suspended",
      id: session.id,
      user: session.subject,
      why,
      ms: Date.now() - started,
      bytes: this.stateBytes.get(session.id) ?? 0,
      lost: this.lost.get(session.id) ?? [],
    });
    await this.keepWithinDisk();
  }

  /** Saves `session`'s state when R changed it, its process living on. */
  async checkpoint(session: SessionLife): Promise<void> {
    const started = Date.now();
    const before = session.savedAt;
    try {
      await session.checkpoint();
    } catch (error) {
      this.failed(session, error);
      return;
    }
    if (session.savedAt === before) return;
    this.options.emit({
      kind: "session-checkpointed",
      id: session.id,
      user: session.subject,
      ms: Date.now() - started,
      bytes: this.stateBytes.get(session.id) ?? 0,
    });
    await this.keepWithinDisk();
  }

  /**
   * Suspends the sessions idle r.suspendIdleMinutes and checkpoints those R changed and that were then
   * idle r.checkpointIdleSeconds. A session whose save failed is tried again one idle period later.
   */
  sweep(now = Date.now()): void {
    const { suspendIdleMinutes, checkpointIdleSeconds } = this.options.config;
    for (const session of this.options.sessions()) {
      if (session.busy || session.suspended || session.closed) continue;
      const idle = now - session.lastAccess.getTime();
      const failed = now - (this.failedAt.get(session.id) ?? 0);
      if (suspendIdleMinutes > 0 && idle >= suspendIdleMinutes * 60_000 && failed >= suspendIdleMinutes * 60_000) {
        void this.suspend(session, "idle").catch(() => undefined);
      } else if (
        checkpointIdleSeconds > 0 &&
        session.unsaved &&
        idle >= checkpointIdleSeconds * 1000 &&
        failed >= checkpointIdleSeconds * 1000
      ) {
        void this.checkpoint(session);
      }
    }
  }

  /**
   * The sessions the records of an earlier run name whose state file is there, as suspended sessions
   * start; the others' records are removed and their ids answered as `lost` (their folder went: a
   * sessions' folder under a temporary folder that a reboot emptied, a person's removal).
   */
  async restorable(): Promise<{ found: Array<{ record: SessionRecord; start: SessionStart }>; lost: string[] }> {
    const { records: store, homes } = this.options;
    const records = await store.readAll();
    const found: Array<{ record: SessionRecord; start: SessionStart }> = [];
    const lost: string[] = [];
    for (const record of records) {
      const { state: file } = homes.folders(record.id);
      // A save that stopped between its two renames (session-state.R) left the previous state aside.
      const state = (await lstat(file).catch(() => undefined)) ?? (await lstat(`${file}.old`).catch(() => undefined));
      if (!state?.isFile()) {
        await store.remove(record.id);
        lost.push(record.id);
        continue;
      }
      this.stateBytes.set(record.id, state.size);
      found.push({
        record,
        start: {
          createdAt: new Date(record.createdAt),
          lastAccess: new Date(record.lastAccess),
          savedAt: new Date(record.savedAt),
          commands: CommandList.fromRecord(record.id, record.commands, UNFINISHED),
        },
      });
    }
    return { found, lost };
  }

  private failed(session: SessionLife, error: unknown): void {
    this.failedAt.set(session.id, Date.now());
    this.options.emit({ kind: "session-save-failed", id: session.id, user: session.subject, error: (error as Error).message });
  }

  private forget(id: string): void {
    this.stateBytes.delete(id);
    this.lost.delete(id);
    this.failedAt.delete(id);
  }

  /** Past r.suspendedMaxMb, the suspended session idle longest is ended, until the states fit. */
  private async keepWithinDisk(): Promise<void> {
    const { maxBytes } = this.options;
    if (maxBytes <= 0) return;
    let total = 0;
    for (const bytes of this.stateBytes.values()) total += bytes;
    const suspended = this.options
      .sessions()
      .filter((s) => s.suspended)
      .sort((a, b) => a.lastAccess.getTime() - b.lastAccess.getTime());
    for (const session of suspended) {
      if (total <= maxBytes) break;
      total -= this.stateBytes.get(session.id) ?? 0;
      const mb = Math.round(maxBytes / 1048576);
      this.options.emit({
        kind: "session-evicted",
        id: session.id,
        user: session.subject,
        reason: `Suspended R session ended: the saved sessions' disk of ${mb} MiB (r.suspendedMaxMb) is full and it was idle longest (since ${session.lastAccess.toISOString()})`,
      });
      await session.end();
    }
  }
}

function recordOf(session: SessionLife, bytes: number, lost: readonly string[]): SessionRecord {
  return {
    id: session.id,
    subject: session.subject,
    createdAt: session.createdAt.toISOString(),
    lastAccess: session.lastAccess.toISOString(),
    savedAt: (session.savedAt ?? new Date()).toISOString(),
    stateBytes: bytes,
    lost,
    commands: session.commands.toRecord(),
    installsForAll: session.installsForAll,
  };
}

/** r.suspendedMaxMb in bytes; 0: a quarter of the file system that holds the data folder. */
export function suspendedMaxBytes(mb: number, dataDir: string): number {
  if (mb > 0) return mb * 1048576;
  try {
    const fs = statfsSync(dataDir);
    return Math.floor((fs.blocks * fs.bsize) / 4);
  } catch {
    return 0;
  }
}
