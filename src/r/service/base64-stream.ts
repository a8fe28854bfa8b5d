import { Fault } from "../../errors/fault.js";

/** What may stand in the body: the alphabet, padding and line breaks. */
const OUTSIDE = /[^A-Za-z0-9+/=\r\n]/;
const BREAKS = /[\r\n]/g;
const NOT_PADDING = /[^=\r\n]/;

/** The bytes `quads` (whole groups of 4, padding only at its end) decode to when all are of the alphabet. */
function decodedLength(quads: string): number {
  const padding = quads.endsWith("==") ? 2 : quads.endsWith("=") ? 1 : 0;
  return (quads.length / 4) * 3 - padding;
}

/**
 * Base64 decoded chunk by chunk as a body arrives (application/x-rdata): line breaks are skipped,
 * any other byte outside the alphabet is refused (400) with its offset, padding may only end it. Node's
 * own decoder skips what it does not know, so a corrupt body could become a different value: it is
 * caught by the length of what was decoded (shorter than the characters give), and only then is the
 * text searched for the culprit. Searching every chunk with a regular expression made 108 MB take
 * ~250 ms where this takes 21–35 ms (measured by hand; the whole assign is BENCH_ONLY=assign's).
 */
export class Base64Stream {
  /** Characters of a quad not complete yet (fewer than 4). */
  private carry = "";
  /** Bytes of the body seen so far. */
  private offset = 0;
  /** Padding was seen: only padding and line breaks may follow. */
  private padded = false;

  /** The bytes the whole quads of `chunk` (with what the previous chunk left) decode to. */
  push(chunk: Uint8Array): Buffer {
    const raw = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString("latin1");
    const at = this.offset;
    this.offset += chunk.byteLength;
    let text = raw.includes("\n") || raw.includes("\r") ? raw.replace(BREAKS, "") : raw;
    const pad = this.padded ? 0 : text.indexOf("=");
    if (this.padded || pad >= 0) {
      const after = NOT_PADDING.exec(text.slice(pad));
      if (after) {
        this.checkAlphabet(raw, at);
        throw notBase64(`data after its padding (offset ${at + pad + after.index} or later)`);
      }
      this.padded = true;
    }
    text = this.carry + text;
    const whole = text.length - (text.length % 4);
    const quads = text.slice(0, whole);
    this.carry = text.slice(whole);
    const bytes = Buffer.from(quads, "base64");
    // Node's decoder also takes the URL-safe alphabet's - and _, which the length does not show; the
    // carry is checked now, so the quads of the next chunk only hold checked characters and its own.
    if (bytes.length !== decodedLength(quads) || quads.includes("-") || quads.includes("_") || OUTSIDE.test(this.carry)) {
      this.checkAlphabet(raw, at);
      throw notBase64(`it is malformed at offset ${at} or later`);
    }
    return bytes;
  }

  /** The body ended: throws when it stopped inside a quad. */
  end(): void {
    if (this.carry.length > 0) throw notBase64(`it ends inside a group of 4 characters (${this.offset} bytes)`);
  }

  /** Throws naming the first byte of `raw` (the chunk at `at`) outside the alphabet, if any. */
  private checkAlphabet(raw: string, at: number): void {
    const bad = OUTSIDE.exec(raw);
    if (bad) throw notBase64(`byte 0x${raw.charCodeAt(bad.index).toString(16).padStart(2, "0")} at offset ${at + bad.index}`);
  }
}

function notBase64(what: string): Fault {
  return new Fault("invalid", `The application/x-rdata body is not base64: ${what}`);
}
