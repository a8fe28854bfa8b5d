/**
 * The logs of the servers tests start, in this process or as processes of their own: never the run's
 * output. Each is written to a file in the test's temporary folder (the server's data folder), or kept
 * in memory when the test has none. When a test or a hook fails, the suite's reporter
 * (test/support/reporter.cts) prints under its failure the last lines of every log that was open while it
 * ran: it asks through `globalThis[Symbol.for("rock-ts.test-logs")]`, since mocha loads a reporter with
 * require() and so gets a copy of its own of any module it would import.
 */
import fs from "node:fs";
import path from "node:path";

/** How many lines of each log a failure shows. */
const TAIL_LINES = 40;
/** What a closed log keeps of its text: its file goes with its folder. */
const KEPT_CHARS = 1 << 20;

export interface TestLog {
  /** Who wrote it, as a failure names it: "the server on port 4711 in this process" (its port added once known). */
  name: string;
  /** Where it is written; undefined when in memory. */
  readonly file: string | undefined;
  write(text: string): void;
  /** Everything written so far (once closed, what it kept: the last MiB). */
  text(): string;
  /** Stops writing to the file, keeping its text in memory; a write after this goes to memory. */
  close(): void;
}

/** Logs open now, in the order they were opened. */
const open = new Set<TestLog>();
/** Logs closed since the current test or hook began: still its servers'. */
let closedSinceBegin: TestLog[] = [];

/**
 * A log named `name`, written to a new file in `folder` (`service.log`, or `service-2.log`… when a
 * server before it on that folder left one), or kept in memory without a folder.
 */
export function openTestLog(name: string, folder?: string): TestLog {
  let file: string | undefined;
  let fd: number | undefined;
  if (folder !== undefined) {
    for (let n = 1; fd === undefined; n++) {
      file = path.join(folder, n === 1 ? "service.log" : `service-${n}.log`);
      try {
        fd = fs.openSync(file, "wx");
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      }
    }
  }
  let memory = "";
  const log: TestLog = {
    name,
    get file() {
      return fd === undefined ? undefined : file;
    },
    write(text) {
      if (fd !== undefined) fs.writeSync(fd, text);
      else memory += text;
    },
    text: () => (fd !== undefined ? fs.readFileSync(file!, "utf8") : memory),
    close() {
      if (!open.delete(log)) return;
      closedSinceBegin.push(log);
      if (fd === undefined) return;
      const text = fs.readFileSync(file!, "utf8");
      fs.closeSync(fd);
      fd = undefined;
      memory = text.length > KEPT_CHARS ? text.slice(text.indexOf("\n", text.length - KEPT_CHARS) + 1) : text;
    },
  };
  open.add(log);
  return log;
}

/** The last `lines` lines of a log's text. */
function tail(text: string, lines = TAIL_LINES): string[] {
  const all = text.split("\n");
  if (all.at(-1) === "") all.pop();
  return all.slice(-lines);
}

/** What a failure shows: each log of the failed test or hook named, then its last lines; empty without any. */
function failureText(): string {
  return [...open, ...closedSinceBegin]
    .map((log) => {
      const lines = tail(log.text());
      if (lines.length === 0) return `the log of ${log.name}: empty`;
      return [`the log of ${log.name}, its last ${lines.length} lines:`, ...lines.map((l) => `  ${l}`)].join("\n");
    })
    .join("\n\n");
}

interface TestLogRegistry {
  /** A test or a hook begins: logs closed before it are not its servers'. */
  begin(): void;
  /** The logs of the servers of the test or hook that just failed, as text to print under its failure. */
  failureText(): string;
}

const registry: TestLogRegistry = {
  begin: () => void (closedSinceBegin = []),
  failureText,
};
(globalThis as Record<symbol, unknown>)[Symbol.for("rock-ts.test-logs")] = registry;
