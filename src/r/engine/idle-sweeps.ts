import type { RConfig } from "../../config/config.js";
import type { ConsoleLog } from "../process/console-log.js";
import type { RSession } from "../session/session.js";
import type { EngineEvent } from "./events.js";

export interface IdleSweepsOptions {
  readonly config: RConfig;
  readonly log: ConsoleLog;
  readonly emit: (event: EngineEvent) => void;
  /** The open sessions, suspended ones included. */
  readonly sessions: () => readonly RSession[];
  /** Checkpoints and suspends the sessions idle long enough (engine/suspension.ts). */
  readonly sweep: () => void;
}

/**
 * What sessions' idle time leads to, looked for on timers until `stop`: a session idle past
 * r.sessionTimeoutMinutes is ended (every r.sessionCheckSeconds), and idle ones are checkpointed and
 * suspended (r.checkpointIdleSeconds, r.suspendIdleMinutes).
 */
export class IdleSweeps {
  private readonly idleTimer: NodeJS.Timeout | undefined;
  private readonly sweepTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: IdleSweepsOptions) {
    const { sessionTimeoutMinutes, sessionCheckSeconds } = options.config;
    if (sessionTimeoutMinutes > 0 && sessionCheckSeconds > 0) {
      this.idleTimer = setInterval(() => void this.closeIdleSessions(), sessionCheckSeconds * 1000);
      this.idleTimer.unref();
    }
    const sweepMs = sweepInterval(options.config);
    if (sweepMs !== undefined) {
      this.sweepTimer = setInterval(() => options.sweep(), sweepMs);
      this.sweepTimer.unref();
    }
  }

  stop(): void {
    clearInterval(this.idleTimer);
    clearInterval(this.sweepTimer);
  }

  private async closeIdleSessions(): Promise<void> {
    const limit = Date.now() - this.options.config.sessionTimeoutMinutes * 60_000;
    const idle = this.options.sessions().filter((s) => !s.busy && s.lastAccess.getTime() < limit);
    for (const session of idle) {
      this.options.log.append(`Closing idle R session ${session.id}\n`);
      this.options.emit({ kind: "session-reaped", id: session.id, user: session.subject });
    }
    await Promise.all(idle.map((s) => s.end()));
  }
}

/**
 * How often the sessions are looked at for a checkpoint or a suspend: a quarter of the shorter idle
 * time, between 1 s and a minute; undefined when neither is on.
 */
function sweepInterval(config: RConfig): number | undefined {
  const idle = [config.checkpointIdleSeconds * 1000, config.suspendIdleMinutes * 60_000].filter((ms) => ms > 0);
  if (idle.length === 0) return undefined;
  return Math.min(60_000, Math.max(1000, Math.min(...idle) / 4));
}
