/**
 * The framing shared by every socket between Node and R: a type byte (ASCII), the payload length as a
 * big-endian uint32, then the payload. See worker.R for the R side.
 */
export interface Frame {
  readonly type: string;
  readonly payload: Buffer;
}

const HEADER = 5;

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

/**
 * Cuts a byte stream into frames. A frame inside one chunk is a view on it; a frame spread over
 * chunks is copied once into a payload allocated when its header comes, so a 100 MB answer costs one
 * copy, not one per chunk of the bytes received so far (which made it quadratic: 225 s for 100 MB).
 */
export class FrameReader {
  private incomplete: Incomplete | undefined;
  /** The start of a header cut by a chunk boundary (at most 4 bytes). */
  private head: Buffer | undefined;

  /** Frames complete so far; the remaining bytes wait for the next chunk. */
  push(chunk: Buffer): Frame[] {
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
    } else if (this.head) {
      data = Buffer.concat([this.head, data]);
      this.head = undefined;
    }
    while (data.length >= HEADER) {
      const length = data.readUInt32BE(1);
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
    if (data.length > 0) this.head = Buffer.from(data);
    return frames;
  }
}
