import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { basename } from "node:path";
import { SetupError } from "./setup-error.js";

export interface RRun {
  readonly code: number | null;
  /** stdout and stderr as R printed them. */
  readonly output: string;
}

/** Output kept in memory for the caller to read; a package install prints far more, kept in its log file. */
const KEEP_BYTES = 64 * 1024;

/**
 * Runs `code` in a fresh R (`r.executable`, R or Rscript) with the site's profile read (where a mirror
 * is configured) and `env` added to this process's environment. When `logFile` is given, everything R
 * prints also goes there.
 */
export function runR(executable: string, code: string, env: Readonly<Record<string, string>>, logFile?: string): Promise<RRun> {
  const args = basename(executable).startsWith("Rscript") ? ["-e", code] : ["--no-echo", "--no-save", "--no-restore", "-e", code];
  return new Promise((resolve, reject) => {
    const child = spawn(executable, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    const log = logFile === undefined ? undefined : createWriteStream(logFile, { mode: 0o644 });
    let output = "";
    const take = (chunk: Buffer): void => {
      log?.write(chunk);
      output += chunk.toString("utf8");
      if (output.length > KEEP_BYTES) output = output.slice(-KEEP_BYTES);
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.once("error", (e: NodeJS.ErrnoException) => {
      log?.end();
      reject(
        e.code === "ENOENT"
          ? new SetupError(
              `R was not found ('${executable}', r.executable): install it (Debian: apt-get install --no-install-recommends r-base-core r-cran-jsonlite)`,
            )
          : new SetupError(`R could not be run ('${executable}'): ${e.message}`),
      );
    });
    child.once("close", (code) => {
      if (log) log.end(() => resolve({ code, output }));
      else resolve({ code, output });
    });
  });
}
