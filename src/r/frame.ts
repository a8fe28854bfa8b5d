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

/** Cuts a byte stream into frames; payloads are views on the received chunks, not copies. */
export class FrameReader {
  private pending: Buffer | undefined;

  /** Frames complete so far; the remaining bytes wait for the next chunk. */
  push(chunk: Buffer): Frame[] {
    let data = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    const frames: Frame[] = [];
    while (data.length >= HEADER) {
      const end = HEADER + data.readUInt32BE(1);
      if (data.length < end) break;
      frames.push({ type: String.fromCharCode(data[0]!), payload: data.subarray(HEADER, end) });
      data = data.subarray(end);
    }
    this.pending = data.length > 0 ? data : undefined;
    return frames;
  }

  /** Bytes received after the last complete frame (handed over when a socket changes protocol). */
  takeRest(): Buffer | undefined {
    const rest = this.pending;
    this.pending = undefined;
    return rest;
  }
}
