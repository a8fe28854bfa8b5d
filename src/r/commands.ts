import type { ValueFormat } from "./protocol.js";

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

/** An asynchronous operation of a session, from submission to the retrieval of its result. */
export class CommandEntry implements CommandInfo {
  status: CommandStatus = "PENDING";
  readonly createdAt = new Date();
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

  completed(result: Buffer | undefined): void {
    this.result = result;
    this.end("COMPLETED");
  }

  failed(error: string): void {
    this.error = error;
    this.end("FAILED");
  }

  /** Resolves when finished, or after `ms` (whichever comes first). */
  async wait(ms: number): Promise<void> {
    if (this.finished || ms <= 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.done, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  }

  private end(status: CommandStatus): void {
    this.status = status;
    this.endAt = new Date();
    this.settle();
  }
}

/** The commands of one session, in submission order; ids are a per-session counter. */
export class CommandList {
  private next = 1;
  private readonly entries = new Map<string, CommandEntry>();

  constructor(private readonly sessionId: string) {}

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
