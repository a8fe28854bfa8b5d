import { Fault } from "../../errors/fault.js";
import type { AssignSource } from "../wire/protocol.js";
import type { SessionDirs } from "../session/home.js";
import { ValueFeed } from "../wire/value-feed.js";
import { Base64Stream } from "./base64-stream.js";
import { OCTET_STREAM } from "./negotiate.js";
import { scriptDecoder, type ScriptDecoder } from "./script-charset.js";

const RDATA = "application/x-rdata";

/**
 * A serialization up to this size is sent to R inside the assign frame, from memory; a larger one goes
 * to R as it arrives (value-feed.ts), so the service never holds more of a body than this and the
 * chunk in flight, however large the value and however many assigns run at once.
 */
const INLINE_BYTES = 1024 * 1024;

/** The whitespace R's parser skips, in the bytes of a script. */
const BLANK = new Set([0x20, 0x09, 0x0a, 0x0b, 0x0c, 0x0d]);

/**
 * The script's bytes (or an assign's value). An empty or blank one is refused (reference-behaviour §3):
 * answering it `null` would hide a client that sent nothing. Stops at the first byte that is not blank.
 */
export function requiredScript(data: Uint8Array): Uint8Array {
  if (data.every((byte) => BLANK.has(byte))) throw new Fault("invalid", "script is required");
  return data;
}

/** The bounds of an assign's body, as sent. */
export interface AssignLimits {
  /** limits.maxAssignBytes: a serialization, passed on to R as it arrives. */
  readonly maxBytes: number;
  /** limits.maxBodyBytes: a script, held whole. */
  readonly maxScriptBytes: number;
}

/** How an assign's body is read, from its media type. */
type BodyKind = "script" | "base64" | "serialized";

function bodyKindOf(contentType: string | undefined): BodyKind {
  const type = contentType?.split(";")[0]?.trim().toLowerCase();
  return type === RDATA ? "base64" : type === OCTET_STREAM ? "serialized" : "script";
}

/**
 * An assign's body as it arrives, read as its media type says: a script gathered (bounded by
 * `maxScriptBytes`) and made UTF-8 by its charset (script-charset.ts), a serialization decoded
 * (base64) and kept in memory while small, then handed to a ValueFeed (`feed`, set from then on) for
 * R to unserialize as it comes. `finish` gives what R assigns; `discard` gives it up.
 */
export class AssignBody {
  private readonly kind: BodyKind;
  /** A script's: set before any byte is read, so that a charset it cannot read is refused at once. */
  private readonly decode: ScriptDecoder | undefined;
  private readonly base64: Base64Stream | undefined;
  private readonly held: Buffer[] = [];
  private heldBytes = 0;
  private received = 0;
  /** The value outgrew INLINE_BYTES: its bytes go to R as they arrive. */
  feed: ValueFeed | undefined;

  constructor(
    contentType: string | undefined,
    /** The session's folders as they are now, where the feed spools what comes before R reads. */
    private readonly dirs: () => SessionDirs,
    private readonly limits: AssignLimits,
  ) {
    this.kind = bodyKindOf(contentType);
    this.decode = this.kind === "script" ? scriptDecoder(contentType) : undefined;
    this.base64 = this.kind === "base64" ? new Base64Stream() : undefined;
  }

  async push(chunk: Uint8Array): Promise<void> {
    this.received += chunk.byteLength;
    // A script is held whole (R parses it whole): it is bounded as any request body is.
    if (this.kind === "script" && this.received > this.limits.maxScriptBytes) {
      throw new Fault("too_large", `The script to assign exceeds the limit of ${this.limits.maxScriptBytes} bytes (limits.maxBodyBytes)`);
    }
    if (this.received > this.limits.maxBytes) {
      throw new Fault("too_large", `The value to assign exceeds the limit of ${this.limits.maxBytes} bytes (limits.maxAssignBytes)`);
    }
    const bytes = this.base64 ? this.base64.push(chunk) : Buffer.from(chunk);
    if (bytes.length === 0) return;
    if (this.feed) return this.feed.write(bytes);
    this.held.push(bytes);
    this.heldBytes += bytes.length;
    if (this.kind === "script" || this.heldBytes <= INLINE_BYTES) return;
    this.feed = new ValueFeed(this.dirs);
    await this.feed.write(Buffer.concat(this.held.splice(0)));
  }

  /** What to assign, once the whole body arrived: a streamed value's end is told to R. */
  async finish(): Promise<AssignSource> {
    this.base64?.end();
    if (this.feed) {
      await this.feed.end();
      return { kind: "stream", feed: this.feed };
    }
    const data = Buffer.concat(this.held);
    return this.decode ? { kind: "script", text: requiredScript(this.decode(data)) } : { kind: "rdata", bytes: requiredScript(data) };
  }

  /** The assign is given up: R stops reading (its read fails) and what was spooled goes. */
  async discard(): Promise<void> {
    await this.feed?.close();
  }
}
