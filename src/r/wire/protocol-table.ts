/**
 * Every frame of the protocol between Node and R, once: `npm run gen` writes the R side's constants
 * (gen/r/protocol.R) from this table (test/tools/gen-r-protocol.ts) and `npm run gen:check` fails when
 * they are stale. How the
 * frames are used (sockets, markers, interrupts) is told in protocol.ts.
 *
 * A frame's letter names it in one direction and in no other: no letter means two things. Its payload is
 * its fields in the order listed here, each a text ended by a NUL, then its body when it has one (the
 * rest of the payload, raw). Fields are what R reads and writes as strings, and an R string cannot hold
 * NUL: a NUL needs no escaping, and R reads the fields up to their NULs (readBin, what = "character")
 * without a look at the body, and writes them with writeBin in one call.
 */

/** How a field's value is written: as it is; in decimal; true or false (R's as.logical reads both); one of a few words. */
type TextKind = "text" | "int" | "flag" | readonly string[];

/**
 * `bytes`: text Node passes on without decoding it (a JSON value), so it stays a view on the payload.
 */
export type FieldKind = TextKind | "bytes";

/** Every field of every frame, by name: a name means the same in each frame that has it. */
export const FIELDS = {
  /** The secret a connection's first frame proves itself with. */
  token: "text",
  /**
   * An isolated session's second secret, made after its fork and left in its own folder (see
   * src/r/process/proof.ts); empty for a session that is not isolated.
   */
  proof: "text",
  /** A session's working directory (and HOME). */
  workDir: "text",
  /** A session's tempdir(). */
  tmpDir: "text",
  uid: "int",
  gid: "int",
  /** RLIMIT_AS in bytes; 0: none. */
  memoryBytes: "int",
  /** RLIMIT_NPROC; 0: none. */
  processes: "int",
  /** /tmp, /var/tmp and /dev/shm of its own (a mount namespace; package rocksandbox). */
  privateTmp: "flag",
  /**
   * `none`: a network namespace of its own, loopback only; `restricted`: one linked to the service's
   * router too (package rocksandbox).
   */
  network: ["host", "none", "restricted"],
  /** With `restricted`: the router's end of the session's link, a /31 whose next address is the session's; empty otherwise. */
  link: "text",
  /** `minimal`: a root of its own holding only what R needs (package rocksandbox). */
  filesystem: ["minimal", "host"],
  /** How a value is answered: jsonlite JSON, or the bytes of R's serialize(x, NULL). */
  format: ["json", "rds"],
  /**
   * What an assignment's body is: a script whose value is assigned, an R-serialized value, or the
   * path of a FIFO in the session's folder that R unserializes one from as it arrives (value-feed.ts).
   */
  source: ["script", "rdata", "stream"],
  /** The name an assignment binds in the session's global environment. */
  symbol: "text",
  /** R's `major.minor`. */
  version: "text",
  pid: "int",
  /** R's error, as R prints it. */
  error: "text",
  /** A message's or a warning's text. */
  text: "text",
  /** A value as JSON text. */
  json: "bytes",
  /** The file a session's state is saved into or restored from (src/r/process/session-state.R), or a session's value pipe (value-pipe.ts). */
  path: "text",
  /** What a session asks Node to send a process (src/r/process/peer-signals.R); `none`: only whether it may, and when the process started. */
  signal: ["none", "TERM", "KILL", "INT"],
  /**
   * When a process started, as R's package ps counts it: seconds since the epoch, a decimal that reads
   * back to the same double; empty in a request: any, in an answer: refused.
   */
  startTime: "text",
} as const satisfies Record<string, FieldKind>;

export type FieldName = keyof typeof FIELDS;

export interface FrameSpec {
  readonly letter: string;
  /** What it asks or tells, for the reader of worker.R. */
  readonly doc: string;
  readonly fields: readonly FieldName[];
  /** What its body holds; none when absent. */
  readonly body?: string;
}

/** Node -> the R server, on its control socket; each is answered by one frame of FROM_SERVER. */
export const TO_SERVER = {
  fork: { letter: "F", doc: "fork a session (answered by forked or forkFailed)", fields: ["token", "workDir", "tmpDir"] },
  forkAs: {
    letter: "I",
    doc: "fork a session that confines itself and becomes uid/gid before it connects (an isolated server forks no other)",
    fields: ["token", "workDir", "tmpDir", "uid", "gid", "memoryBytes", "processes", "privateTmp", "network", "link", "filesystem"],
  },
  ping: { letter: "P", doc: "answered by pong", fields: [] },
  version: { letter: "Q", doc: "R.version (a plain list for JSON)", fields: ["format"] },
} as const satisfies Record<string, FrameSpec>;

/** The R server -> Node: its greeting (the first frame of the control socket), then answers. */
export const FROM_SERVER = {
  ready: { letter: "S", doc: "greeting: the server started", fields: ["token", "version", "pid"] },
  refused: { letter: "N", doc: "greeting: the server cannot start, and why", fields: ["token", "error"] },
  forked: { letter: "K", doc: "the session's pid", fields: ["pid"] },
  forkFailed: { letter: "Y", doc: "why no session was forked", fields: ["error"] },
  pong: { letter: "G", doc: "the answer to ping", fields: [] },
  version: { letter: "U", doc: "R.version", fields: [], body: "JSON text or R serialization, as asked" },
} as const satisfies Record<string, FrameSpec>;

/**
 * Node -> a session, on its main socket. An evaluation's letter says how its value is answered and
 * whether it is live (messages and warnings as frames, output streamed): it has no field, so R reads
 * nothing before the script on the hot path (evalPiped's pipe is the session's own, VALUE_PIPE in its
 * home: REST's R-serialized answers once took the path as a field, ~10 µs more of R per call: test/bench/
 * README.md, issue 40).
 */
export const TO_SESSION = {
  evalJson: { letter: "E", doc: "evaluate, answer JSON", fields: [], body: "the script (UTF-8)" },
  evalRds: { letter: "R", doc: "evaluate, answer R serialization", fields: [], body: "the script (UTF-8)" },
  liveJson: { letter: "L", doc: "evaluate live, answer JSON", fields: [], body: "the script (UTF-8)" },
  liveRds: { letter: "B", doc: "evaluate live, answer R serialization", fields: [], body: "the script (UTF-8)" },
  evalPiped: {
    letter: "J",
    doc: "evaluate, answer R serialization: a large value through the session's value pipe (piping, then an empty value)",
    fields: [],
    body: "the script (UTF-8)",
  },
  assign: {
    letter: "A",
    doc: "assign the value of the body to symbol",
    fields: ["source", "symbol"],
    body: "the script (UTF-8), the R serialization, or the path of the FIFO it comes through",
  },
  drain: { letter: "D", doc: "consume a SIGINT that landed after the evaluation it aimed at; not answered", fields: [] },
  save: {
    letter: "Z",
    doc: "save the session's state into path, the process living on (answered by json: what could not be saved)",
    fields: ["path"],
  },
  restore: {
    letter: "H",
    doc: "restore the state saved in path, before any other request (answered by an empty value, or an error)",
    fields: ["path"],
  },
  signalled: {
    letter: "g",
    doc: "the answer to a session's signal: startTime when Node granted it and sent the signal, empty when refused",
    fields: ["startTime"],
  },
} as const satisfies Record<string, FrameSpec>;

/** A session -> Node: the greeting of each of its two sockets, then on the main one answers, events and signal requests. */
export const FROM_SESSION = {
  main: { letter: "C", doc: "greeting of the main socket", fields: ["token", "pid", "proof"] },
  output: {
    letter: "O",
    doc: "greeting of the output socket, which then carries printed text and markers",
    fields: ["token", "proof"],
  },
  value: { letter: "V", doc: "a value: R serialization, or nothing (an assignment)", fields: [], body: "the value" },
  json: { letter: "T", doc: "a value as JSON", fields: ["json"] },
  piping: { letter: "p", doc: "the value is being written into the value pipe (open it to read); its end comes after", fields: [] },
  error: { letter: "X", doc: "the request failed", fields: ["error"] },
  message: { letter: "M", doc: "a message of a live evaluation", fields: ["text"] },
  warning: { letter: "W", doc: "a warning of a live evaluation", fields: ["text"] },
  signal: {
    letter: "k",
    doc: "during an evaluation: send signal to pid, a process the session cannot signal itself (answered by signalled)",
    fields: ["pid", "signal", "startTime"],
  },
} as const satisfies Record<string, FrameSpec>;

export type Letter<Frames extends Record<string, FrameSpec>> = Frames[keyof Frames]["letter"];
export type AnyLetter = Letter<typeof TO_SERVER> | Letter<typeof FROM_SERVER> | Letter<typeof TO_SESSION> | Letter<typeof FROM_SESSION>;

/** The letters of a direction, for a FrameReader to accept. */
export function lettersOf<Frames extends Record<string, FrameSpec>>(frames: Frames): Array<Letter<Frames>> {
  return Object.values(frames).map((frame) => frame.letter);
}

/** Type byte, then the payload's length (uint32, big endian). */
export const HEADER_BYTES = 5;

/** The file, in an isolated session's home (the folder above its working directory), that holds its proof. */
export const PROOF_FILE = ".rock-proof";

/** The FIFO, in a session's home, large values go through between Node and R (src/r/wire/value-pipe.ts). */
export const VALUE_PIPE = ".value-pipe";

/** R reads a socket 4096 bytes at a time; room is left for a drain frame sent with the request. */
export const ONE_READ = 4096 - HEADER_BYTES;

/** Markers on a session's output stream: this byte, which printed text never holds (R strings cannot), then a type byte. */
export const MARKER_LEAD = 0;

export const MARKER = {
  /** Before the answer of a live request. */
  eval: 0,
  /** Before each message or warning frame of a live request. */
  sync: 1,
  /** R began the request (live, or larger than ONE_READ). */
  start: 2,
} as const;
