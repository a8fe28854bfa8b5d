import { closeSync, existsSync, fstatSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { Channel } from "../../channel.js";

/**
 * A longer line is cut into lines of at most this many characters (UTF-16 code units, never inside a
 * surrogate pair; at most 192 KiB of UTF-8), in the file as in memory: R can print 40 MB without a
 * newline, and the unfinished line, every TailLog message and every line of GetLog stay bounded.
 */
export const MAX_LINE_CHARS = 64 * 1024;
/** Lines kept in memory for GetLog and the start of TailLog… */
const MEMORY_LINES = 10_000;
/**
 * …and at most this many characters of them (10,000 lines of 420 on average): 10,000 cut lines would
 * hold 640 MB, and lines kept longer are promoted to V8's old space as garbage to come: ten prints of
 * 40 MB peaked at +48 MB of RSS, +107 MB with 8 Mi.
 */
export const MEMORY_CHARS = 4 * 1024 * 1024;
const NEWLINE = 0x0a;

export interface ConsoleLogOptions {
  /** The log file, e.g. `<dataDir>/rserver.log`. */
  readonly file: string;
  /**
   * The file is rotated before it would grow past this size; a single append larger than that is
   * spread over as many rotations as it takes (the oldest files drop out), cut at line ends. A file
   * only exceeds it when one line does (MAX_LINE_CHARS bounds that).
   */
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
  /** Kept lines are `lines[first…]`: dropping from the front is a move of `first`, compacted now and then. */
  private lines: string[] = [];
  private first = 0;
  private chars = 0;
  /** The unfinished line in pieces, joined once when it ends: appending to one string would copy it every time. */
  private readonly partial: string[] = [];
  private partialChars = 0;
  private readonly listeners = new Set<LineListener>();
  /** Room for one chunk of the output socket (64 KiB) at 3 bytes per character, cut newlines included. */
  private readonly scratch = Buffer.allocUnsafe(4 * 64 * 1024);
  private scratchUsed = 0;

  constructor(private readonly options: ConsoleLogOptions) {
    this.fd = openSync(options.file, "a", 0o600);
    this.size = fstatSync(this.fd).size;
  }

  append(text: string): void {
    if (text.length === 0) return;
    const cuts: number[] = [];
    let start = 0;
    for (;;) {
      const newline = text.indexOf("\n", start);
      this.extend(text, start, newline < 0 ? text.length : newline, cuts);
      if (newline < 0) break;
      this.endLine();
      start = newline + 1;
    }
    let from = 0;
    for (const cut of cuts) {
      this.encode(text.slice(from, cut));
      this.encode("\n");
      from = cut;
    }
    this.encode(from === 0 ? text : text.slice(from));
    this.flush();
  }

  /** The last `limit` complete lines, oldest first. */
  last(limit: number): string[] {
    return limit <= 0 ? [] : this.lines.slice(Math.max(this.first, this.lines.length - limit));
  }

  /** Calls `listener` with every new line until the returned function is called. */
  subscribe(listener: LineListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The last `limit` lines, then (with `follow`) each new line until `signal` aborts. */
  async *tail(limit: number, follow: boolean, signal: AbortSignal): AsyncGenerator<string> {
    // A follower that reads slower than R prints loses the oldest lines it has not read, and is told
    // how many: its backlog is bounded like the log's memory.
    const lines = new Channel<string>({ capacity: MEMORY_LINES, overflow: "drop-oldest", signal });
    const unsubscribe = follow ? this.subscribe((line) => void lines.push(line)) : undefined;
    try {
      yield* this.last(limit);
      if (!follow) return;
      for await (const line of lines) {
        const dropped = lines.takeDropped();
        if (dropped > 0) yield `[${dropped} lines not shown: the reader fell behind]`;
        yield line;
      }
    } finally {
      unsubscribe?.();
      lines.close();
    }
  }

  close(): void {
    for (const listener of [...this.listeners]) this.listeners.delete(listener);
    closeSync(this.fd);
  }

  /**
   * Adds `text[start, end)` (no newline in it) to the unfinished line, ending that line wherever it
   * would pass MAX_LINE_CHARS; `cuts` gets those positions.
   */
  private extend(text: string, start: number, end: number, cuts: number[]): void {
    while (this.partialChars + (end - start) > MAX_LINE_CHARS) {
      let cut = start + MAX_LINE_CHARS - this.partialChars;
      if (cut > start && isHighSurrogate(text.charCodeAt(cut - 1))) cut--;
      this.addPartial(text.slice(start, cut));
      this.endLine();
      cuts.push(cut);
      start = cut;
    }
    if (end > start) this.addPartial(text.slice(start, end));
  }

  private addPartial(piece: string): void {
    this.partial.push(piece);
    this.partialChars += piece.length;
  }

  private endLine(): void {
    const line = this.partial.length === 1 ? this.partial[0]! : this.partial.join("");
    this.partial.length = 0;
    this.partialChars = 0;
    this.lines.push(line);
    this.chars += line.length;
    while (this.lines.length - this.first > MEMORY_LINES || this.chars > MEMORY_CHARS) {
      this.chars -= this.lines[this.first]!.length;
      // Released now, not at the next compaction: a dropped line may be 64 K characters.
      this.lines[this.first++] = "";
    }
    if (this.first > MEMORY_LINES) {
      this.lines = this.lines.slice(this.first);
      this.first = 0;
    }
    for (const listener of this.listeners) listener(line);
  }

  /**
   * Adds `text` as UTF-8 to what goes to the file, in a buffer reused across appends: printed output
   * arrives in 64 KiB chunks, and a new Buffer for each was most of what a 40 MB print allocated.
   */
  private encode(text: string): void {
    // Up to 3 bytes per UTF-16 code unit (a surrogate pair: 4 bytes for 2).
    const most = 3 * text.length;
    if (most > this.scratch.length - this.scratchUsed) this.flush();
    if (most > this.scratch.length) this.write(Buffer.from(text, "utf8"));
    else this.scratchUsed += this.scratch.write(text, this.scratchUsed, "utf8");
  }

  private flush(): void {
    if (this.scratchUsed === 0) return;
    this.write(this.scratch.subarray(0, this.scratchUsed));
    this.scratchUsed = 0;
  }

  /** Writes `bytes`, rotating before the file would pass maxBytes; only a line longer than that may. */
  private write(bytes: Buffer): void {
    let offset = 0;
    while (offset < bytes.length) {
      const room = this.options.maxBytes - this.size;
      let end = bytes.length;
      if (end - offset > room) {
        const lastFit = room > 0 ? bytes.lastIndexOf(NEWLINE, offset + room - 1) : -1;
        if (lastFit >= offset) end = lastFit + 1;
        else if (this.size > 0) {
          this.rotate();
          continue;
        } else {
          const lineEnd = bytes.indexOf(NEWLINE, offset);
          end = lineEnd < 0 ? bytes.length : lineEnd + 1;
        }
      }
      this.size += end - offset;
      while (offset < end) offset += writeSync(this.fd, bytes, offset, end - offset);
    }
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
    this.fd = openSync(file, "a", 0o600);
    this.size = 0;
  }
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
