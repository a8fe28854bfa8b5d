import type { ValueFormat } from "../wire/protocol.js";

export type CommandStatus = "PENDING" | "IN_PROGRESS" | "COMPLETED" | "FAILED";

/** What a command tells of itself: the service answers it as a `Command` message. */
export interface CommandInfo {
  readonly id: string;
  readonly sessionId: string;
  readonly script: string;
  readonly status: CommandStatus;
  readonly finished: boolean;
  readonly createdAt: Date;
  readonly startAt: Date | undefined;
  readonly endAt: Date | undefined;
  readonly error: string | undefined;
  readonly result: Buffer | undefined;
}

/** A command as a session's record on disk keeps it (engine/records.ts): dates as ISO text, the result as base64. */
export interface CommandRecord {
  readonly id: string;
  readonly script: string;
  readonly status: CommandStatus;
  readonly createdAt: string;
  readonly startAt?: string;
  readonly endAt?: string;
  readonly error?: string;
  readonly format?: ValueFormat;
  readonly result?: string;
}

/** A session's commands on disk: the next id and the entries. */
export interface CommandsRecord {
  readonly next: number;
  readonly entries: readonly CommandRecord[];
}

/** An asynchronous operation of a session, from submission to the retrieval of its result. */
export class CommandEntry implements CommandInfo {
  status: CommandStatus = "PENDING";
  createdAt = new Date();
  startAt: Date | undefined;
  endAt: Date | undefined;
  error: string | undefined;
  result: Buffer | undefined;
  /** Set by a delete: a pending command then never runs. */
  deleted = false;
  readonly done: Promise<void>;
  private settle!: () => void;

  constructor(
    readonly id: string,
    readonly sessionId: string,
    readonly script: string,
    /** Fixed at submission: the format its result is answered in (none for an assign). */
    readonly format: ValueFormat | undefined,
  ) {
    this.done = new Promise((resolve) => (this.settle = resolve));
  }

  get finished(): boolean {
    return this.status === "COMPLETED" || this.status === "FAILED";
  }

  started(): void {
    this.status = "IN_PROGRESS";
    this.startAt = new Date();
  }

  completed(result: Buffer | undefined, at?: Date): void {
    this.result = result;
    this.end("COMPLETED", at);
  }

  failed(error: string, at?: Date): void {
    this.error = error;
    this.end("FAILED", at);
  }

  /** Resolves when finished, or after `ms` (whichever comes first). */
  async wait(ms: number): Promise<void> {
    if (this.finished || ms <= 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.done, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  }

  private end(status: CommandStatus, at = new Date()): void {
    this.status = status;
    this.endAt = at;
    this.settle();
  }
}

/** The commands of one session, in submission order; ids are a per-session counter. */
export class CommandList {
  private next = 1;
  private readonly entries = new Map<string, CommandEntry>();

  constructor(private readonly sessionId: string) {}

  /**
   * The commands a record kept. One that had not finished when it was written (the service stopped or
   * crashed first) failed with `unfinished`: nothing runs it any more.
   */
  static fromRecord(sessionId: string, record: CommandsRecord, unfinished: string): CommandList {
    const list = new CommandList(sessionId);
    list.next = record.next;
    for (const r of record.entries) {
      const entry = new CommandEntry(r.id, sessionId, r.script, r.format);
      entry.createdAt = new Date(r.createdAt);
      entry.startAt = r.startAt === undefined ? undefined : new Date(r.startAt);
      entry.result = r.result === undefined ? undefined : Buffer.from(r.result, "base64");
      if (r.status === "COMPLETED") entry.completed(entry.result, r.endAt === undefined ? undefined : new Date(r.endAt));
      else if (r.status === "FAILED") entry.failed(r.error ?? unfinished, r.endAt === undefined ? undefined : new Date(r.endAt));
      else entry.failed(unfinished);
      list.entries.set(entry.id, entry);
    }
    return list;
  }

  toRecord(): CommandsRecord {
    const iso = (date: Date | undefined): string | undefined => date?.toISOString();
    return {
      next: this.next,
      entries: this.list().map((e) => ({
        id: e.id,
        script: e.script,
        status: e.status,
        createdAt: e.createdAt.toISOString(),
        ...(e.startAt ? { startAt: iso(e.startAt) } : {}),
        ...(e.endAt ? { endAt: iso(e.endAt) } : {}),
        ...(e.error === undefined ? {} : { error: e.error }),
        ...(e.format === undefined ? {} : { format: e.format }),
        ...(e.result === undefined ? {} : { result: e.result.toString("base64") }),
      })),
    };
  }

  add(script: string, format: ValueFormat | undefined): CommandEntry {
    const entry = new CommandEntry(String(this.next++), this.sessionId, script, format);
    this.entries.set(entry.id, entry);
    return entry;
  }

  get(id: string): CommandEntry | undefined {
    return this.entries.get(id);
  }

  remove(id: string): boolean {
    const entry = this.entries.get(id);
    if (!entry) return false;
    entry.deleted = true;
    return this.entries.delete(id);
  }

  list(): CommandEntry[] {
    return [...this.entries.values()];
  }
}
