import { HEADER_BYTES, type AnyLetter } from "./protocol-table.js";

/** A frame of the protocol between Node and R (protocol.ts); `type` is one of the letters its reader accepts. */
export interface Frame<L extends AnyLetter = AnyLetter> {
  readonly type: L;
  readonly payload: Buffer;
}

/** A peer broke the protocol: a frame of a type its direction has not, over its size limit, or malformed. */
export class ProtocolError extends Error {}

export function encodeFrame(type: AnyLetter, ...parts: readonly Uint8Array[]): Buffer {
  let length = 0;
  for (const part of parts) length += part.length;
  const frame = Buffer.allocUnsafe(HEADER_BYTES + length);
  frame[0] = type.charCodeAt(0);
  frame.writeUInt32BE(length, 1);
  let offset = HEADER_BYTES;
  for (const part of parts) {
    frame.set(part, offset);
    offset += part.length;
  }
  return frame;
}

/** A frame whose header came but not all of its payload. */
interface Incomplete<L extends AnyLetter> {
  readonly type: L;
  readonly payload: Buffer;
  readonly length: number;
  filled: number;
  /** Where its payload goes as it arrives instead (see FrameReader's `divert`); `payload` is then empty. */
  readonly to?: PayloadSink;
}

/** Takes a diverted payload's bytes as they arrive; each is a view that stays valid. */
export type PayloadSink = (bytes: Buffer) => void;

/**
 * Asked when a frame's payload does not come whole in one chunk: a sink to pass its bytes to as they
 * arrive, or undefined to gather it. A diverted frame is returned, once its last byte passed, with an
 * empty payload.
 */
export type Divert<L extends AnyLetter> = (type: L, length: number) => PayloadSink | undefined;

const EMPTY = Buffer.alloc(0);

/** The largest greeting frame, header included: a peer must prove itself before Node reads more. */
export const MAX_GREETING = 4096;
export const MAX_GREETING_PAYLOAD = MAX_GREETING - HEADER_BYTES;

/**
 * Cuts a byte stream into frames. A frame inside one chunk is a view on it; a frame spread over
 * chunks is copied once into a payload allocated when its header comes, so a 100 MB answer costs one
 * copy, not one per chunk of the bytes received so far (which made it quadratic: 225 s for 100 MB).
 */
export class FrameReader<L extends AnyLetter> {
  /** The accepted letters by their byte. */
  private readonly types: Array<L | undefined> = [];
  private incomplete: Incomplete<L> | undefined;
  /** Bytes not cut into frames yet: a header cut by a chunk boundary, or what follows the last frame asked for. */
  private rest: Buffer | undefined;

  /**
   * `accepted`: the letters of the direction read (a frame of any other type breaks the protocol).
   * `maxPayload` bounds what a peer that has not proved itself yet can make Node allocate.
   */
  constructor(
    accepted: readonly L[],
    private readonly maxPayload = 0xffffffff,
    private readonly divert?: Divert<L>,
  ) {
    for (const letter of accepted) this.types[letter.charCodeAt(0)] = letter;
  }

  /**
   * Frames complete so far, at most `max`; the remaining bytes wait for the next chunk (or takeRest).
   * Throws ProtocolError for a type not accepted or a header announcing more than `maxPayload`.
   */
  push(chunk: Buffer, max = Infinity): Array<Frame<L>> {
    const frames: Array<Frame<L>> = [];
    let data = chunk;
    if (this.incomplete) {
      const frame = this.incomplete;
      const n = Math.min(data.length, frame.length - frame.filled);
      if (frame.to) frame.to(n === data.length ? data : data.subarray(0, n));
      else data.copy(frame.payload, frame.filled, 0, n);
      frame.filled += n;
      if (frame.filled < frame.length) return frames;
      this.incomplete = undefined;
      frames.push({ type: frame.type, payload: frame.payload });
      data = data.subarray(n);
    } else if (this.rest) {
      data = Buffer.concat([this.rest, data]);
      this.rest = undefined;
    }
    while (data.length >= HEADER_BYTES && frames.length < max) {
      const type = this.types[data[0]!];
      if (type === undefined) throw new ProtocolError(`frame of type ${data[0]}`);
      const length = data.readUInt32BE(1);
      if (length > this.maxPayload) throw new ProtocolError(`frame of ${length} bytes`);
      const end = HEADER_BYTES + length;
      if (data.length >= end) {
        frames.push({ type, payload: data.subarray(HEADER_BYTES, end) });
        data = data.subarray(end);
        continue;
      }
      const to = this.divert?.(type, length);
      if (to) {
        if (data.length > HEADER_BYTES) to(data.subarray(HEADER_BYTES));
        this.incomplete = { type, payload: EMPTY, length, filled: data.length - HEADER_BYTES, to };
        return frames;
      }
      // Only the payload is allocated: a header with the largest length still fits a Buffer.
      const payload = Buffer.allocUnsafe(length);
      const filled = data.copy(payload, 0, HEADER_BYTES);
      this.incomplete = { type, payload, length, filled };
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
