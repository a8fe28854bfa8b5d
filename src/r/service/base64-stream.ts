import { Fault } from "../../errors/fault.js";

/** What may stand in the body: the alphabet, padding and line breaks. */
const OUTSIDE = /[^A-Za-z0-9+/=\r\n]/;
const BREAKS = /[\r\n]/g;
const NOT_PADDING = /[^=\r\n]/;

/**
 * Base64 decoded chunk by chunk as a body arrives (application/x-rdata): line breaks are skipped,
 * any other byte outside the alphabet is refused (400) with its offset, padding may only end it. Node's
 * own decoder skips what it does not know; a corrupt body must not become a different value.
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
    let text = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString("latin1");
    const at = this.offset;
    this.offset += chunk.byteLength;
    const bad = OUTSIDE.exec(text);
    if (bad) throw notBase64(`byte 0x${text.charCodeAt(bad.index).toString(16).padStart(2, "0")} at offset ${at + bad.index}`);
    if (text.includes("\n") || text.includes("\r")) text = text.replace(BREAKS, "");
    const pad = this.padded ? 0 : text.indexOf("=");
    if (this.padded || pad >= 0) {
      const after = NOT_PADDING.exec(text.slice(pad));
      if (after) throw notBase64(`data after its padding (offset ${at + pad + after.index} or later)`);
      this.padded = true;
    }
    text = this.carry + text;
    const whole = text.length - (text.length % 4);
    this.carry = text.slice(whole);
    return Buffer.from(text.slice(0, whole), "base64");
  }

  /** The body ended: throws when it stopped inside a quad. */
  end(): void {
    if (this.carry.length > 0) throw notBase64(`it ends inside a group of 4 characters (${this.offset} bytes)`);
  }
}

function notBase64(what: string): Fault {
  return new Fault("invalid", `The application/x-rdata body is not base64: ${what}`);
}
