import { createRequire } from "node:module";
import { pino, type DestinationStream } from "pino";
import type { LogFormat, LogLevel } from "../config/config.js";

/**
 * The service's own log (not the R console log): one JSON object per line on stderr. Callers pass
 * facts, never credentials, headers or bodies; the redaction below is the net under that rule.
 */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export interface LoggerOptions {
  readonly level?: LogLevel;
  readonly format?: LogFormat;
  /** Where lines go; stderr by default (tests capture them). */
  readonly destination?: DestinationStream;
  /** On stderr: how long info lines may wait to be written together; 0 or unset, each at once. */
  readonly flushMs?: number;
}

/**
 * Field names that would hold a secret if a caller ever passed one. Top level only: fields are flat,
 * and wildcard paths (`*.key`) double the cost of every access line (12 µs instead of 5).
 */
const REDACT_PATHS = ["authorization", "password", "secret", "key", "shareKey", "headers", "body", "script"];

/**
 * Writes are synchronous: measured on the REST `1+1` eval, an asynchronous destination's write through
 * libuv's thread pool cost ~10% of the call, a direct write ~2%. On stderr, info lines are gathered
 * (`flushMs`): a write per line cost a REST eval of `1+1` at one client 6–13 µs of the server's CPU and
 * 8–17 µs of latency (two servers differing only in log.flushMs, h2load in turns, their stderr a pipe to
 * a reader as under systemd or Docker; test/bench/README.md, Logging and metrics). A warning or an
 * error is written at once, with what waited before it, and what waits is written when the process exits.
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const flushMs = options.flushMs ?? 0;
  const stderr = options.destination || options.format === "pretty" ? undefined : stderrLines(flushMs);
  const log = pino(
    {
      level: options.level ?? "info",
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    },
    options.destination ?? stderr ?? prettyStderr(),
  );
  // What waited goes out before a warning or an error does, and with it.
  const now = stderr && flushMs > 0 ? () => stderr.flushSync() : () => undefined;
  return {
    info: (msg, fields) => log.info(fields, msg),
    warn: (msg, fields) => {
      log.warn(fields, msg);
      now();
    },
    error: (msg, fields) => {
      log.error(fields, msg);
      now();
    },
  };
}

type Stderr = ReturnType<typeof pino.destination>;

/** The byte count at which gathered lines are written without waiting for `flushMs`. */
const BATCH_BYTES = 8192;

/** One stderr destination per flush delay in the process, each written out when the process exits. */
const stderrByDelay = new Map<number, Stderr>();

function stderrLines(flushMs: number): Stderr {
  let dest = stderrByDelay.get(flushMs);
  if (!dest) {
    const gathered = flushMs > 0;
    const made = pino.destination({ dest: 2, sync: true, ...(gathered ? { minLength: BATCH_BYTES, periodicFlush: flushMs } : {}) });
    if (gathered) process.once("exit", () => made.flushSync());
    stderrByDelay.set(flushMs, made);
    dest = made;
  }
  return dest;
}

/** pino-pretty is a dev dependency: `log.format: pretty` is for a person at a checkout, not production. */
function prettyStderr(): DestinationStream {
  let pretty: (opts: { destination: number; sync: boolean }) => DestinationStream;
  try {
    pretty = createRequire(import.meta.url)("pino-pretty") as typeof pretty;
  } catch {
    throw new Error("log.format: pretty needs the pino-pretty package (a dev dependency: npm install pino-pretty)");
  }
  return pretty({ destination: 2, sync: true });
}
