import { timingSafeEqual } from "node:crypto";
import type { Socket } from "node:net";
import { decodeFields } from "../wire/fields.js";
import { FrameReader, MAX_GREETING_PAYLOAD, ProtocolError, type Frame } from "../wire/frames.js";
import { FROM_SERVER, FROM_SESSION, type Letter } from "../wire/protocol-table.js";

/**
 * Who connected back over loopback: the R server on its control socket, or a forked session on one of
 * its two. Anyone on the host may connect, so the first frame says who it is (with the token it was
 * given) before the socket is handed to anything.
 */

const GREETING_TIMEOUT_MS = 10_000;

/** The first frame of the control socket. */
const SERVER_GREETINGS = [FROM_SERVER.ready.letter, FROM_SERVER.refused.letter];
/** The first frame of a session's sockets. */
const SESSION_GREETINGS = [FROM_SESSION.main.letter, FROM_SESSION.output.letter];

/** Who the R server is, from its greeting; rejects with why it cannot start, or when it is not the server started. */
export async function serverHello(socket: Socket, token: string): Promise<{ version: string; pid: number }> {
  try {
    const { frame } = await readGreeting(socket, SERVER_GREETINGS);
    const greeting =
      frame.type === FROM_SERVER.ready.letter
        ? decodeFields(FROM_SERVER.ready, frame.payload)
        : decodeFields(FROM_SERVER.refused, frame.payload);
    if (!sameSecret(greeting.token, token)) throw new Error("R server failed to authenticate");
    if ("error" in greeting) throw new Error(greeting.error);
    return { version: greeting.version, pid: greeting.pid };
  } catch (error) {
    if (error instanceof ProtocolError) throw new Error(`R server failed to authenticate: ${error.message}`);
    throw error;
  }
}

/**
 * Which of a session's sockets this is and what it claims (its fork's token, its proof, its pid), with
 * the bytes that followed; the claims are the caller's to check against the forks it awaits.
 */
export async function sessionGreeting(socket: Socket) {
  const { frame, rest } = await readGreeting(socket, SESSION_GREETINGS);
  const greeting =
    frame.type === FROM_SESSION.main.letter
      ? { socket: "main" as const, ...decodeFields(FROM_SESSION.main, frame.payload) }
      : { socket: "output" as const, ...decodeFields(FROM_SESSION.output, frame.payload) };
  return { greeting, rest };
}

interface Greeting<L extends Letter<typeof FROM_SERVER> | Letter<typeof FROM_SESSION>> {
  readonly frame: Frame<L>;
  /** Bytes that followed the greeting frame. */
  readonly rest: Buffer | undefined;
}

/** The first frame of a loopback connection, one of `letters`; the socket is left paused for its new owner. */
function readGreeting<L extends Letter<typeof FROM_SERVER> | Letter<typeof FROM_SESSION>>(
  socket: Socket,
  letters: readonly L[],
): Promise<Greeting<L>> {
  socket.setNoDelay(true);
  return new Promise((resolve, reject) => {
    const reader = new FrameReader(letters, MAX_GREETING_PAYLOAD);
    const timer = setTimeout(() => finish(new Error("no greeting")), GREETING_TIMEOUT_MS);
    const finish = (error: Error | undefined, greeting?: Greeting<L>): void => {
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("error", finish);
      socket.off("close", onClose);
      socket.pause();
      if (error) reject(error);
      else resolve(greeting!);
    };
    const onClose = (): void => finish(new Error("closed before greeting"));
    const onData = (chunk: Buffer): void => {
      let frame: Frame<L> | undefined;
      try {
        [frame] = reader.push(chunk, 1);
      } catch (error) {
        // A frame over the limit, or not a greeting.
        return finish(error instanceof Error ? error : new Error(String(error)));
      }
      if (frame) finish(undefined, { frame, rest: reader.takeRest() });
    };
    socket.on("data", onData);
    socket.on("error", finish);
    socket.on("close", onClose);
  });
}

function sameSecret(received: string, expected: string): boolean {
  const a = Buffer.from(received);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
