import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { execa } from "execa";
import { Fault } from "../../errors/fault.js";
import { PACKAGE_SCRIPT } from "./script.js";
import { packageEnvironment } from "../confine/environment.js";
import { signalGroup } from "../confine/signals.js";

export interface RunOptions {
  /** Each line R prints (stdout and stderr merged, in order), as it is printed. */
  readonly onLine?: (line: string) => void;
  /** Aborting kills the R process and everything it started. */
  readonly signal?: AbortSignal;
}

export interface RunRequest extends RunOptions {
  readonly rExecutable: string;
  readonly scratchDir: string;
  /** ROCK_PKG_* values and any extra environment for R. */
  readonly env: Readonly<Record<string, string>>;
  /** Appends to the server's console log. */
  readonly log: (text: string) => void;
  /** One line for the log that says what runs. */
  readonly title: string;
  /** Stops R (and what it started) past this many milliseconds; 0: no limit. */
  readonly timeoutMs: number;
}

const cancelled = () => new Fault("canceled", "The package operation was cancelled");

/** How long a cancelled R gets to end on SIGTERM before its process group is killed outright. */
const KILL_GRACE_MS = 2000;
/** Lines of output quoted in an error when R died without writing its own message. */
const TAIL_LINES = 15;

// R CMD INSTALL, git and compilers run as R's children. Each R is made a process-group leader so
// that cancelling (or this server exiting) can end the whole tree, not just R.
const liveGroups = new Set<number>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const pid of liveGroups) signalGroup(pid, "SIGKILL");
  });
}

/**
 * Runs the package script in a fresh R process with its own temporary folder (TMPDIR, so that
 * downloads and git clones land there and are deleted with it). Resolves with the bytes the script
 * wrote as its result; rejects with a Fault carrying R's message.
 */
export async function runPackageScript(request: RunRequest): Promise<Buffer> {
  const { signal } = request;
  if (signal?.aborted) throw cancelled();
  const dir = await mkdtemp(join(request.scratchDir, "rpkg-"));
  const scriptFile = join(dir, "packages.R");
  const outFile = join(dir, "result");
  const errorFile = join(dir, "error");
  const libraryFile = join(dir, "library");
  const startedAt = Date.now();
  const tail: string[] = [];
  const log = (text: string) => {
    try {
      request.log(text);
    } catch {
      // The console log must never break a package operation.
    }
  };
  try {
    await writeFile(scriptFile, PACKAGE_SCRIPT);
    log(`[packages] ${request.title}\n`);
    installExitHook();
    const subprocess = execa(request.rExecutable, ["--no-echo", "--no-save", "--no-restore", "-f", scriptFile], {
      extendEnv: false,
      env: {
        ...packageEnvironment(process.env),
        ...request.env,
        TMPDIR: dir,
        ROCK_PKG_OUT: outFile,
        ROCK_PKG_ERROR: errorFile,
        ROCK_PKG_LIBRARY_FILE: libraryFile,
      },
      stdin: "ignore",
      all: true,
      buffer: false,
      reject: false,
      detached: true,
      cleanup: false,
      stripFinalNewline: false,
    });
    const pid = subprocess.pid;
    if (pid !== undefined) liveGroups.add(pid);
    // Why R was stopped before it ended on its own: the caller cancelled, or the time limit passed.
    let stopped: Fault | undefined;
    let forceKill: NodeJS.Timeout | undefined;
    const stop = (why: Fault, logLine: string) => {
      if (pid === undefined || stopped) return;
      stopped = why;
      log(`[packages] ${logLine}: ${request.title}\n`);
      signalGroup(pid, "SIGTERM");
      forceKill = setTimeout(() => signalGroup(pid, "SIGKILL"), KILL_GRACE_MS);
      forceKill.unref();
    };
    const onAbort = () => stop(cancelled(), "cancelled");
    signal?.addEventListener("abort", onAbort, { once: true });
    // Aborted while the folder was being prepared: the listener came too late to hear it.
    if (signal?.aborted) onAbort();
    const seconds = request.timeoutMs / 1000;
    const deadline =
      request.timeoutMs > 0
        ? setTimeout(
            () =>
              stop(
                new Fault("deadline", `The package operation did not end within ${seconds} s and was stopped`),
                `timed out after ${seconds} s`,
              ),
            request.timeoutMs,
          )
        : undefined;
    try {
      for await (const line of subprocess.iterable({ from: "all" })) {
        log(`${line}\n`);
        tail.push(line);
        if (tail.length > TAIL_LINES) tail.shift();
        try {
          request.onLine?.(line);
        } catch {
          // A listener that went away must not stop R's output from reaching the log.
        }
      }
      const result = await subprocess;
      if (stopped) throw stopped;
      if (result.failed && result.exitCode === undefined) {
        throw new Fault("internal", `R could not be run: ${result.shortMessage}`);
      }
      if (result.exitCode === 0) {
        const output = await readFile(outFile);
        log(`[packages] done: ${request.title}\n`);
        return output;
      }
      const error = await scriptError(errorFile, result.exitCode, tail);
      log(`[packages] failed: ${request.title}: ${error.message.replace(/\s*\n\s*/g, " ")}\n`);
      throw error;
    } finally {
      signal?.removeEventListener("abort", onAbort);
      clearTimeout(deadline);
      if (pid !== undefined) {
        // Whatever R left running (a hung compiler, a git child) goes with it.
        signalGroup(pid, "SIGKILL");
        liveGroups.delete(pid);
      }
      if (forceKill) clearTimeout(forceKill);
      if (stopped) await removeLocksSince(libraryFile, startedAt);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * R CMD INSTALL locks a package's folder in the library with `00LOCK-<name>` (or the whole library
 * with `00LOCK`) and refuses to install while the lock exists: one left by a stopped operation would
 * fail every later install of that package. Operations run one at a time, so the locks made since
 * this one started are its own.
 */
async function removeLocksSince(libraryFile: string, since: number): Promise<void> {
  let library: string;
  try {
    library = (await readFile(libraryFile, "utf8")).trim();
  } catch {
    return; // Stopped before R knew its library: it installed nothing.
  }
  const entries = await readdir(library).catch(() => [] as string[]);
  for (const entry of entries.filter((name) => name.startsWith("00LOCK"))) {
    const path = join(library, entry);
    const made = await stat(path).then(
      (s) => s.mtimeMs,
      () => 0,
    );
    // A second of slack: file systems may round modification times down.
    if (made >= since - 1000) await rm(path, { recursive: true, force: true });
  }
}

async function scriptError(errorFile: string, exitCode: number | undefined, tail: readonly string[]): Promise<Fault> {
  let text: string | undefined;
  try {
    text = await readFile(errorFile, "utf8");
  } catch {
    text = undefined;
  }
  if (text !== undefined) {
    const newline = text.indexOf("\n");
    const kind = newline < 0 ? text : text.slice(0, newline);
    const message = (newline < 0 ? "" : text.slice(newline + 1)).trimEnd();
    return new Fault(kind === "notfound" ? "not_found" : "internal", message || "The package operation failed");
  }
  const last = tail.filter((line) => line.trim() !== "").join("\n");
  return new Fault("internal", `R ended with status ${exitCode ?? "unknown"}${last ? `: ${last}` : ""}`);
}
