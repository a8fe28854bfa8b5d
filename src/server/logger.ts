/**
 * The service's own log (not the R console log): one line per event on stderr. Callers pass facts,
 * never credentials or request bodies.
 */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export function createLogger(quiet = false): Logger {
  const write = (level: string, msg: string, fields?: Record<string, unknown>) => {
    if (quiet && level === "info") return;
    process.stderr.write(`${new Date().toISOString()} ${level} ${msg}${fields ? " " + JSON.stringify(fields) : ""}\n`);
  };
  return {
    info: (m, f) => write("info", m, f),
    warn: (m, f) => write("warn", m, f),
    error: (m, f) => write("error", m, f),
  };
}
