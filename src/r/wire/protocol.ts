/**
 * The protocol between Node and R (src/r/process/worker.R): how it is used. Its frames, their letters and fields
 * are in protocol-table.ts, from which `npm run gen` writes the R side's constants (gen/r/protocol.R).
 *
 * Sockets. Node listens on a loopback port; every connection proves itself with its first frame, the
 * greeting, which carries a secret token (any local process can reach a loopback port):
 * - the control socket of the R server process (greeting ready, or refused when it cannot start);
 * - per session, a main socket (greeting main) for requests and answers, and an output socket (greeting
 *   output) that carries what the session prints (sink()), as raw text, not frames.
 * The R server learns its port, token, isolation, profile and setup library from lines on stdin.
 *
 * Frames. A type byte (one ASCII letter) + the payload length (uint32, big endian) + the payload: its
 * fields, each a text ended by a NUL, then its body (protocol-table.ts). Each side answers one request at
 * a time, in order:
 * - control socket: fork or forkAs -> forked or forkFailed; ping -> pong; version -> version;
 * - main socket: an evaluation or assign -> value, json or error; drain -> nothing. During a live
 *   evaluation R also sends message and warning frames before its answer.
 *
 * Output markers. NUL + a type byte on the output stream (printed text never holds NUL, which R strings
 * cannot contain). A live request gets a START marker when R begins it, and an EVAL (before its answer)
 * or SYNC (before each message or warning) marker for each of its frames: matching markers to frames
 * restores the order of printed text and events across the two sockets. Other requests print
 * everything, messages and warnings included, on the output stream alone and their answer has no marker.
 * A request larger than ONE_READ also gets a START marker.
 *
 * Interrupts. Node interrupts an evaluation with SIGINT. R waits for socket data with interrupts
 * enabled, and a signal then would lose the part of a request R had read: a request up to ONE_READ
 * bytes is read at once, so a signal can only land before any of it was read, and R keeps it for that
 * request; for a larger one Node holds the signal back until its START marker. A signal may land after
 * the evaluation it aimed at ended: Node then sends drain before the next request, so R consumes it there.
 *
 * Signals to peers. During an evaluation R may ask Node, with a signal frame on the main socket, to signal
 * a process it cannot signal itself (src/r/process/peer-signals.R: a process of another session of the same
 * owner, src/r/engine/peer-signals.ts), and waits for the one signalled frame that answers it before it
 * goes on: one such request at a time, answered only while the request that asked still runs, so the
 * answer always precedes the next request on the socket and R always reads it (an interrupt that lands
 * while R waits for it is held until it came). A second request before the answer, or one outside an
 * evaluation, breaks the protocol.
 */
import { encodeFrame } from "./frames.js";
import { frameOf, type FieldsOf, type FieldValue } from "./fields.js";
import { TO_SERVER, TO_SESSION } from "./protocol-table.js";
import type { ValueFeed } from "./value-feed.js";

/** How an R value is answered: jsonlite JSON, or the bytes of R's serialize(x, NULL). */
export type ValueFormat = FieldValue<"format">;

/**
 * What to assign: the value of an R expression, an R-serialized value, or one R unserializes as it
 * arrives (value-feed.ts).
 */
export type AssignSource =
  | { readonly kind: "script"; readonly text: Uint8Array }
  | { readonly kind: "rdata"; readonly bytes: Uint8Array }
  | { readonly kind: "stream"; readonly feed: ValueFeed };

/** What an assign frame carries: a streamed value as the path of the pipe R reads it from. */
export type FramedSource = Exclude<AssignSource, { kind: "stream" }> | { readonly kind: "stream"; readonly path: string };

/** Who an isolated session process runs as, and its limits (the fields are told in protocol-table.ts). */
export type SessionIdentity = Omit<FieldsOf<typeof TO_SERVER.forkAs>, keyof ForkRequest>;

interface ForkRequest {
  /** The token the session's two connections greet with. */
  readonly token: string;
  readonly workDir: string;
  readonly tmpDir: string;
}

/** The drain frame, sent before a request when an interrupt may have landed after its evaluation. */
export const DRAIN = frameOf(TO_SESSION.drain, {});
export const PING = frameOf(TO_SERVER.ping, {});

const EVAL = { json: TO_SESSION.evalJson.letter, rds: TO_SESSION.evalRds.letter } as const satisfies Record<ValueFormat, string>;
const LIVE = { json: TO_SESSION.liveJson.letter, rds: TO_SESSION.liveRds.letter } as const satisfies Record<ValueFormat, string>;
const LIVE_BYTES = Object.values(LIVE).map((letter) => letter.charCodeAt(0));

/**
 * The request that evaluates `script` in a session process. A live evaluation streams what it prints
 * and signals as events; any other prints to the console log.
 */
export function evalFrame(script: Uint8Array, format: ValueFormat, live = false): Buffer {
  return encodeFrame((live ? LIVE : EVAL)[format], script);
}

/** As evalFrame, rds: a large value is written by R into the session's value pipe (value-pipe.ts). */
export function pipedEvalFrame(script: Uint8Array): Buffer {
  return encodeFrame(TO_SESSION.evalPiped.letter, script);
}

export function isLive(request: Buffer): boolean {
  return LIVE_BYTES.includes(request[0]!);
}

export function assignFrame(symbol: string, source: FramedSource): Buffer {
  const body = source.kind === "script" ? source.text : source.kind === "rdata" ? source.bytes : Buffer.from(source.path);
  return frameOf(TO_SESSION.assign, { source: source.kind, symbol }, body);
}

/** An isolated session is forked as `identity`. */
export function forkFrame(fork: ForkRequest, identity?: SessionIdentity): Buffer {
  return identity ? frameOf(TO_SERVER.forkAs, { ...fork, ...identity }) : frameOf(TO_SERVER.fork, fork);
}

export function versionFrame(format: ValueFormat): Buffer {
  return frameOf(TO_SERVER.version, { format });
}

/** Saves the session's state into `path`, the process living on. */
export function saveFrame(path: string): Buffer {
  return frameOf(TO_SESSION.save, { path });
}

/** The answer to a session's signal request: when the process started, when granted; undefined: refused. */
export function signalledFrame(startTime: number | undefined): Buffer {
  return frameOf(TO_SESSION.signalled, { startTime: startTime === undefined ? "" : String(startTime) });
}

/** Restores the state saved in `path`: a resumed session's first request. */
export function restoreFrame(path: string): Buffer {
  return frameOf(TO_SESSION.restore, { path });
}
