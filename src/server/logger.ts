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
}

/**
 * Field names that would hold a secret if a caller ever passed one. Top level only: fields are flat,
 * and wildcard paths (`*.key`) double the cost of every access line (12 µs instead of 5).
 */
const REDACT_PATHS = ["authorization", "password", "secret", "key", "shareKey", "headers", "body", "script"];

/**
 * Writes are synchronous: measured on the REST `1+1` eval, an asynchronous destination's write through
 * libuv's thread pool cost ~10% of the call, a direct write ~2%; and nothing is lost on exit.
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const log = pino(
    {
      level: options.level ?? "info",
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    },
    options.destination ?? (options.format === "pretty" ? prettyStderr() : pino.destination({ dest: 2, sync: true })),
  );
  return {
    info: (msg, fields) => log.info(fields, msg),
    warn: (msg, fields) => log.warn(fields, msg),
    error: (msg, fields) => log.error(fields, msg),
  };
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
