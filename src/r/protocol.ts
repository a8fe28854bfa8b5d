/**
 * The protocol between Node and R (src/r/worker.R), in one place.
 *
 * Sockets. Node listens on a loopback port; every connection proves itself with its first frame, the
 * greeting, which carries a secret token (any local process can reach a loopback port):
 * - the control socket of the R server process (greeting S, or X when it cannot start);
 * - per session, a main socket (greeting C) for requests and answers, and an output socket (greeting
 *   O) that carries what the session prints (sink()), as raw text, not frames.
 * The R server learns its port, token, isolation and profile from four lines on stdin.
 *
 * Frames. A type byte (one ASCII letter, see the constants below) + the payload length (uint32, big
 * endian) + the payload. Each side answers one request at a time, in order:
 * - control socket: F (fork) -> F (the child's pid) or X; P (ping) -> P; Q (R.version) -> V;
 * - main socket: E (evaluate), L (live evaluate), A (assign) -> V, T or X; D (drain) -> nothing. During
 *   a live evaluation R also sends M (message) and W (warning) frames before its answer. T is a value
 *   too, a large JSON text that R writes straight from its string: the text, then a NUL.
 *
 * Output markers. NUL + a type byte on the output stream (printed text never holds NUL, which R strings
 * cannot contain). A live request gets a START marker when R begins it, and an EVAL (before its answer)
 * or SYNC (before each M or W) marker for each of its frames: matching markers to frames restores the
 * order of printed text and events across the two sockets. Other requests print everything, messages
 * and warnings included, on the output stream alone and their answer has no marker. A request larger
 * than ONE_READ also gets a START marker.
 *
 * Interrupts. Node interrupts an evaluation with SIGINT. R waits for socket data with interrupts
 * enabled, and a signal then would lose the part of a request R had read: a request up to ONE_READ
 * bytes is read at once, so a signal can only land before any of it was read, and R keeps it for that
 * request; for a larger one Node holds the signal back until its START marker. A signal may land after
 * the evaluation it aimed at ended: Node then sends D before the next request, so R consumes it there.
 */

/** Requests, Node -> R. */
export const Request = {
  eval: "E",
  live: "L",
  assign: "A",
  drain: "D",
  fork: "F",
  ping: "P",
  version: "Q",
} as const;

/** Answers and events, R -> Node. */
export const Answer = {
  value: "V",
  /** A value as text followed by a NUL (see the protocol above). */
  text: "T",
  error: "X",
  message: "M",
  warning: "W",
  forked: "F",
  pong: "P",
} as const;

/** The first frame of each connection, R -> Node (a server that cannot start greets with Answer.error). */
export const Greeting = {
  server: "S",
  main: "C",
  output: "O",
} as const;

/** The type byte after NUL on the output stream. */
export const Marker = {
  eval: 0,
  sync: 1,
  start: 2,
} as const;

/** The byte that starts a marker. */
export const MARKER_LEAD = 0;

/** How an R value is answered: jsonlite JSON, or the bytes of R's serialize(x, NULL). */
export type ValueFormat = "json" | "rds";

/** How a value comes back: JSON text or R serialization (the first byte of E, L and Q payloads). */
export const FormatByte = { json: "j", rds: "r" } as const satisfies Record<ValueFormat, string>;

/** What to assign: the value of an R expression, or an R-serialized value. */
export type AssignSource =
  | { readonly kind: "script"; readonly text: Uint8Array }
  | { readonly kind: "rdata"; readonly bytes: Uint8Array };

/** What an A request assigns: the value of a script or an R-serialized value. */
export const SourceByte = { script: "x", rdata: "r" } as const satisfies Record<AssignSource["kind"], string>;

export interface Frame {
  readonly type: string;
  readonly payload: Buffer;
}

const HEADER = 5;

/** R reads a socket 4096 bytes at a time; room is left for a drain frame sent with the request. */
export const ONE_READ = 4096 - HEADER;

export function encodeFrame(type: string, ...parts: readonly Uint8Array[]): Buffer {
  let length = 0;
  for (const part of parts) length += part.length;
  const frame = Buffer.allocUnsafe(HEADER + length);
  frame[0] = type.charCodeAt(0);
  frame.writeUInt32BE(length, 1);
  let offset = HEADER;
  for (const part of parts) {
    frame.set(part, offset);
    offset += part.length;
  }
  return frame;
}

/** A frame whose header came but not all of its payload. */
interface Incomplete {
  readonly type: string;
  readonly payload: Buffer;
  filled: number;
}

export class FrameTooLargeError extends Error {}

/**
 * Cuts a byte stream into frames. A frame inside one chunk is a view on it; a frame spread over
 * chunks is copied once into a payload allocated when its header comes, so a 100 MB answer costs one
 * copy, not one per chunk of the bytes received so far (which made it quadratic: 225 s for 100 MB).
 */
export class FrameReader {
  private incomplete: Incomplete | undefined;
  /** Bytes not cut into frames yet: a header cut by a chunk boundary, or what follows the last frame asked for. */
  private rest: Buffer | undefined;

  /** `maxPayload` bounds what a peer that has not proved itself yet can make Node allocate. */
  constructor(private readonly maxPayload = 0xffffffff) {}

  /**
   * Frames complete so far, at most `max`; the remaining bytes wait for the next chunk (or takeRest).
   * Throws FrameTooLargeError for a header announcing more than `maxPayload`.
   */
  push(chunk: Buffer, max = Infinity): Frame[] {
    const frames: Frame[] = [];
    let data = chunk;
    if (this.incomplete) {
      const frame = this.incomplete;
      const n = Math.min(data.length, frame.payload.length - frame.filled);
      data.copy(frame.payload, frame.filled, 0, n);
      frame.filled += n;
      if (frame.filled < frame.payload.length) return frames;
      this.incomplete = undefined;
      frames.push({ type: frame.type, payload: frame.payload });
      data = data.subarray(n);
    } else if (this.rest) {
      data = Buffer.concat([this.rest, data]);
      this.rest = undefined;
    }
    while (data.length >= HEADER && frames.length < max) {
      const length = data.readUInt32BE(1);
      if (length > this.maxPayload) throw new FrameTooLargeError(`frame of ${length} bytes`);
      const type = String.fromCharCode(data[0]!);
      const end = HEADER + length;
      if (data.length >= end) {
        frames.push({ type, payload: data.subarray(HEADER, end) });
        data = data.subarray(end);
        continue;
      }
      // Only the payload is allocated: a header with the largest length still fits a Buffer.
      const payload = Buffer.allocUnsafe(length);
      const filled = data.copy(payload, 0, HEADER);
      this.incomplete = { type, payload, filled };
      return frames;
    }
    if (data.length > 0) this.rest = Buffer.from(data);
    return frames;
  }

  /**
   * The bytes received after the frames returned, for a new owner of the stream (after a greeting, the
   * output socket carries raw text). Only whole: a frame begun and not complete has none to give back.
   */
  takeRest(): Buffer | undefined {
    if (this.incomplete) throw new Error("a frame is incomplete");
    const rest = this.rest;
    this.rest = undefined;
    return rest;
  }
}

// Requests, encoded by Node and decoded by worker.R. The decoders are R's reading written in TypeScript,
// for the tests to check each encoder against.

const FORMAT = { json: Buffer.from(FormatByte.json), rds: Buffer.from(FormatByte.rds) } as const;
const SOURCE = { script: Buffer.from(SourceByte.script), rdata: Buffer.from(SourceByte.rdata) } as const;
/** The drain frame, sent before a request when an interrupt may have landed after its evaluation. */
export const DRAIN = encodeFrame(Request.drain);
export const PING = encodeFrame(Request.ping);

/**
 * The request that evaluates `script` in a session process. A live evaluation streams what it prints
 * and signals as events; any other prints to the console log.
 */
export function evalFrame(script: Uint8Array, format: ValueFormat, live = false): Buffer {
  return encodeFrame(live ? Request.live : Request.eval, FORMAT[format], script);
}

export function isLive(request: Buffer): boolean {
  return request[0] === Request.live.charCodeAt(0);
}

export interface EvalRequest {
  readonly live: boolean;
  readonly format: ValueFormat;
  readonly script: Buffer;
}

export function decodeEval(frame: Frame): EvalRequest {
  return { live: frame.type === Request.live, format: formatOf(frame.payload.subarray(0, 1)), script: frame.payload.subarray(1) };
}

/** Payload: source byte, symbol length (uint32, big endian), symbol (UTF-8), body. */
export function assignFrame(symbol: string, source: AssignSource): Buffer {
  const name = Buffer.from(symbol, "utf8");
  const length = Buffer.allocUnsafe(4);
  length.writeUInt32BE(name.length);
  return source.kind === "script"
    ? encodeFrame(Request.assign, SOURCE.script, length, name, source.text)
    : encodeFrame(Request.assign, SOURCE.rdata, length, name, source.bytes);
}

export function decodeAssign(payload: Buffer): { readonly symbol: string; readonly source: AssignSource } {
  const length = payload.readUInt32BE(1);
  const symbol = payload.subarray(5, 5 + length).toString("utf8");
  const body = payload.subarray(5 + length);
  const kind = payload.subarray(0, 1).toString("latin1");
  return { symbol, source: kind === SourceByte.rdata ? { kind: "rdata", bytes: body } : { kind: "script", text: body } };
}

export type SessionNetwork = "host" | "none";
export type SessionFilesystem = "minimal" | "host";

/** Who an isolated session process runs as, and its limits. */
export interface SessionIdentity {
  readonly uid: number;
  readonly gid: number;
  /** RLIMIT_AS in bytes; 0: none. */
  readonly memoryBytes: number;
  /** RLIMIT_NPROC; 0: none. */
  readonly processes: number;
  /** /tmp, /var/tmp and /dev/shm of its own (a mount namespace; package rocksandbox). */
  readonly privateTmp: boolean;
  /** `none`: a network namespace of its own, loopback only (package rocksandbox). */
  readonly network: SessionNetwork;
  /** `minimal`: a root of its own holding only what R needs (package rocksandbox). */
  readonly filesystem: SessionFilesystem;
}

export interface ForkRequest {
  /** The token the session's two connections greet with. */
  readonly token: string;
  readonly workDir: string;
  readonly tmpDir: string;
  readonly identity?: SessionIdentity;
}

/** Payload: NUL-separated fields (paths cannot hold NUL), the identity's seven last when isolated. */
export function forkFrame(fork: ForkRequest): Buffer {
  const { token, workDir, tmpDir, identity } = fork;
  const confined = identity ? `\0${identity.uid}\0${identity.gid}\0${identity.memoryBytes}\0${identity.processes}\0${identity.privateTmp ? 1 : 0}\0${identity.network}\0${identity.filesystem}` : "";
  return encodeFrame(Request.fork, Buffer.from(`${token}\0${workDir}\0${tmpDir}${confined}`, "utf8"));
}

export function decodeFork(payload: Buffer): ForkRequest {
  const [token = "", workDir = "", tmpDir = "", uid, gid, memoryBytes, processes, privateTmp, network, filesystem] = payload.toString("utf8").split("\0");
  const identity =
    uid === undefined
      ? undefined
      : {
          uid: Number(uid),
          gid: Number(gid),
          memoryBytes: Number(memoryBytes),
          processes: Number(processes),
          privateTmp: privateTmp === "1",
          network: network === "none" ? ("none" as const) : ("host" as const),
          filesystem: filesystem === "minimal" ? ("minimal" as const) : ("host" as const),
        };
  return identity ? { token, workDir, tmpDir, identity } : { token, workDir, tmpDir };
}

export function versionFrame(format: ValueFormat): Buffer {
  return encodeFrame(Request.version, FORMAT[format]);
}

function formatOf(byte: Buffer): ValueFormat {
  return byte.toString("latin1") === FormatByte.rds ? "rds" : "json";
}

// Greetings, written by worker.R and decoded by Node.

/** The largest greeting frame, header included: a peer must prove itself before Node reads more. */
export const MAX_GREETING = 4096;
export const MAX_GREETING_PAYLOAD = MAX_GREETING - HEADER;

export type ServerGreeting =
  | { readonly ok: true; readonly token: string; readonly version: string; readonly pid: number }
  | { readonly ok: false; readonly token: string; readonly error: string };

/** S: token\nversion\npid; X: token\nwhy the server cannot start. Undefined for any other frame. */
export function decodeServerGreeting(frame: Frame): ServerGreeting | undefined {
  const text = frame.payload.toString("utf8");
  const newline = text.indexOf("\n");
  const token = newline < 0 ? text : text.slice(0, newline);
  if (frame.type === Answer.error) return { ok: false, token, error: text.slice(newline + 1) };
  if (frame.type !== Greeting.server) return undefined;
  const [, version = "", pid] = text.split("\n");
  return { ok: true, token, version, pid: Number(pid) };
}

export type SessionGreeting =
  | { readonly socket: "main"; readonly token: string; readonly pid: number }
  | { readonly socket: "output"; readonly token: string };

/** C: token\npid (the main socket); O: token (the output socket). Undefined for any other frame. */
export function decodeSessionGreeting(frame: Frame): SessionGreeting | undefined {
  const [token = "", pid] = frame.payload.toString("utf8").split("\n");
  if (frame.type === Greeting.main) return { socket: "main", token, pid: Number(pid) };
  if (frame.type === Greeting.output) return { socket: "output", token };
  return undefined;
}
