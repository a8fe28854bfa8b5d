import type { Outcome } from "../process/child.js";
import { assignFrame, pipedEvalFrame, type AssignSource } from "../wire/protocol.js";
import type { AnswerPipe } from "../wire/value-pipe.js";
import type { SessionDirs } from "./home.js";

/** How a command that assigns is shown in its list (the value itself is not: it may be large or binary). */
export function assignScript(symbol: string, source: AssignSource): string {
  if (source.kind === "script") return `${symbol} <- ${Buffer.from(source.text).toString("utf8")}`;
  return `${symbol} <- unserialize(<${source.kind === "rdata" ? `${source.bytes.length} bytes` : "streamed"}>)`;
}

/**
 * What a job sends R: a frame, or one made when the job's turn comes and undone once R answered (a
 * streamed assign's pipe is made then, in the folder as the process reading it owns it).
 */
export type Request = Buffer | { open(dirs: SessionDirs): Promise<Buffer>; close(): Promise<void> };

export function assignRequest(symbol: string, source: AssignSource): Request {
  if (source.kind !== "stream") return assignFrame(symbol, source);
  const { feed } = source;
  return {
    open: async (dirs) => assignFrame(symbol, { kind: "stream", path: await feed.open(dirs) }),
    close: () => feed.close(),
  };
}

/** The answer of a run whose installs could not be shared: the caller must not count on them. */
export function notShared(error: unknown): Outcome {
  const why = error instanceof Error ? error.message : String(error);
  return { ok: false, error: `Error: the packages installed could not be shared with other sessions: ${why}` };
}

/** Undoes what a request made, or would have: it will not run. */
export function release(request: Request): void {
  if (!Buffer.isBuffer(request)) void request.close();
}

/**
 * An R-serialized answer that R may write into the session's value pipe (`answer()`, once R said so):
 * the job ends once R's writing did.
 */
export function pipedRequest(script: Uint8Array, answer: () => AnswerPipe | undefined): Request {
  const frame = pipedEvalFrame(script);
  return {
    open: () => Promise.resolve(frame),
    // Its failure is the answer's (evalStream).
    close: () => {
      const piped = answer();
      if (!piped) return Promise.resolve();
      piped.answer();
      return piped.ended().catch(() => undefined);
    },
  };
}
