import { closeSync, existsSync, fstatSync, openSync, renameSync, rmSync, writeSync } from "node:fs";

const MEMORY_LINES = 10_000;

export interface ConsoleLogOptions {
  /** The log file, e.g. `<dataDir>/rserver.log`. */
  readonly file: string;
  /** The file is rotated before it would grow past this size. */
  readonly maxBytes: number;
  /** How many rotated files (`.1`, `.2`, …) are kept. */
  readonly files: number;
}

type LineListener = (line: string) => void;

/**
 * The console of the R server and its sessions (and of package installations): appended to a rotated
 * file, its last lines kept in memory for GetLog and streamed to TailLog subscribers.
 */
export class ConsoleLog {
  private fd: number;
  private size: number;
  private readonly lines: string[] = [];
  private partial = "";
  private readonly listeners = new Set<LineListener>();

  constructor(private readonly options: ConsoleLogOptions) {
    this.fd = openSync(options.file, "a");
    this.size = fstatSync(this.fd).size;
  }

  append(text: string): void {
    if (text.length === 0) return;
    this.write(text);
    const parts = (this.partial + text).split("\n");
    this.partial = parts.pop() ?? "";
    for (const line of parts) {
      this.lines.push(line);
      for (const listener of this.listeners) listener(line);
    }
    if (this.lines.length > MEMORY_LINES * 1.5) this.lines.splice(0, this.lines.length - MEMORY_LINES);
  }

  /** The last `limit` complete lines, oldest first. */
  last(limit: number): string[] {
    return limit <= 0 ? [] : this.lines.slice(-limit);
  }

  /** Calls `listener` with every new line until the returned function is called. */
  subscribe(listener: LineListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The last `limit` lines, then (with `follow`) each new line until `signal` aborts. */
  async *tail(limit: number, follow: boolean, signal: AbortSignal): AsyncGenerator<string> {
    const queued: string[] = [];
    let wake: (() => void) | undefined;
    const unsubscribe = follow
      ? this.subscribe((line) => {
          queued.push(line);
          wake?.();
        })
      : undefined;
    const onAbort = (): void => wake?.();
    signal.addEventListener("abort", onAbort);
    try {
      yield* this.last(limit);
      while (follow && !signal.aborted) {
        if (queued.length === 0) {
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
          continue;
        }
        yield queued.shift()!;
      }
    } finally {
      unsubscribe?.();
      signal.removeEventListener("abort", onAbort);
    }
  }

  close(): void {
    for (const listener of [...this.listeners]) this.listeners.delete(listener);
    closeSync(this.fd);
  }

  private write(text: string): void {
    const bytes = Buffer.from(text, "utf8");
    if (this.size > 0 && this.size + bytes.length > this.options.maxBytes) this.rotate();
    writeSync(this.fd, bytes);
    this.size += bytes.length;
  }

  private rotate(): void {
    closeSync(this.fd);
    const { file, files } = this.options;
    if (files <= 0) rmSync(file, { force: true });
    else {
      rmSync(`${file}.${files}`, { force: true });
      for (let i = files - 1; i >= 1; i--) if (existsSync(`${file}.${i}`)) renameSync(`${file}.${i}`, `${file}.${i + 1}`);
      renameSync(file, `${file}.1`);
    }
    this.fd = openSync(file, "a");
    this.size = 0;
  }
}
