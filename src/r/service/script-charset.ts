import { isAscii, isUtf8 } from "node:buffer";
import { Fault } from "../../errors/fault.js";

/** A script's bytes as R parses them: UTF-8 (the R server's encoding, whatever the client sent). */
export type ScriptDecoder = (bytes: Uint8Array) => Uint8Array;

/** ISO-8859-1's names (IANA's, and Java's): the WHATWG Encoding standard, which TextDecoder follows, reads them as windows-1252. */
const LATIN1 = new Set([
  "iso-8859-1",
  "iso_8859-1",
  "iso_8859-1:1987",
  "iso8859-1",
  "iso8859_1",
  "8859_1",
  "iso-ir-100",
  "latin1",
  "l1",
  "ibm819",
  "cp819",
  "csisolatin1",
]);

/** US-ASCII's names (IANA's): the WHATWG Encoding standard reads them as windows-1252 too. */
const US_ASCII = new Set([
  "us-ascii",
  "ascii",
  "us",
  "iso646-us",
  "ansi_x3.4-1968",
  "ansi_x3.4-1986",
  "iso_646.irv:1991",
  "iso-ir-6",
  "ibm367",
  "cp367",
  "csascii",
]);

/**
 * How a script's bytes become UTF-8, by the `charset` parameter of its media type (an HttpBody's
 * `content_type`: over REST, the request's Content-Type). Without one, a script that is valid UTF-8
 * is UTF-8 and any other is ISO-8859-1: Opal and Armadillo send scripts without a charset, encoded as
 * Spring encodes a String body, in ISO-8859-1, whose letters outside ASCII are almost never valid
 * UTF-8 (it would take one of Â to ô followed by a C1 control or a sign of A0 to BF, such as ©). A
 * charset named is the client's word: ISO-8859-1 and US-ASCII are read as themselves, any other
 * charset as the WHATWG Encoding standard reads it (UTF-8, windows-1252, UTF-16, …; through
 * TextDecoder, windows-1252 aside); a script with a byte its charset does not allow answers 400, a
 * charset the standard does not name 415, before the body is read. A script without a charset or in
 * UTF-8, ISO-8859-1, US-ASCII or windows-1252 goes as it came when it is ASCII (or, but for the last
 * three, UTF-8), after one scan of its bytes: only a script that needs it is copied.
 */
export function scriptDecoder(contentType: string | undefined): ScriptDecoder {
  const charset = charsetOf(contentType);
  if (charset === undefined) return (bytes) => (isUtf8(bytes) ? bytes : fromLatin1(bytes));
  const label = charset.trim().toLowerCase();
  if (LATIN1.has(label)) return fromLatin1;
  if (US_ASCII.has(label)) return checked(charset, isAscii);
  const decoder = textDecoder(label);
  if (decoder === undefined) {
    throw new Fault(
      "unsupported_media",
      `The charset '${charset}' of the script's Content-Type is not supported: use utf-8 (the default), iso-8859-1, us-ascii, windows-1252 or another charset of the WHATWG Encoding standard`,
    );
  }
  if (decoder.encoding === "utf-8") return checked(charset, isUtf8);
  if (decoder.encoding === "windows-1252") return fromWindows1252;
  return (bytes) => {
    let text: string;
    try {
      text = decoder.decode(bytes);
    } catch {
      throw notIn(charset);
    }
    return Buffer.from(text, "utf8");
  };
}

/** The `charset` parameter of a media type (RFC 9110 §8.3.1: any case, a token or a quoted string). */
function charsetOf(contentType: string | undefined): string | undefined {
  const semicolon = contentType ? contentType.indexOf(";") : -1;
  if (!contentType || semicolon < 0) return undefined;
  for (const parameter of contentType.slice(semicolon + 1).split(";")) {
    const equals = parameter.indexOf("=");
    if (equals < 0 || parameter.slice(0, equals).trim().toLowerCase() !== "charset") continue;
    const value = parameter.slice(equals + 1).trim();
    return value.length >= 2 && value.startsWith('"') && value.endsWith('"') ? value.slice(1, -1) : value;
  }
  return undefined;
}

/** A decoder that refuses bad bytes; undefined for a label it does not know, or that stands for no charset. */
function textDecoder(label: string): TextDecoder | undefined {
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(label, { fatal: true });
  } catch {
    return undefined;
  }
  // The standard's "replacement" (ISO-2022-KR, HZ-GB-2312, …) decodes every text as one error.
  return decoder.encoding === "replacement" ? undefined : decoder;
}

/** The bytes as they are, when `valid` says they are text of `charset`, which UTF-8 reads the same. */
function checked(charset: string, valid: (bytes: Uint8Array) => boolean): ScriptDecoder {
  return (bytes) => {
    if (!valid(bytes)) throw notIn(charset);
    return bytes;
  };
}

function fromLatin1(bytes: Uint8Array): Uint8Array {
  return isAscii(bytes) ? bytes : Buffer.from(latin1Text(bytes), "utf8");
}

/** The characters of windows-1252's bytes 0x80 to 0x9F, by the WHATWG Encoding standard (ISO-8859-1's controls where it has none). */
const WINDOWS_1252_C1 =
  "\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f" +
  "\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178";

/**
 * Windows-1252 is ISO-8859-1 but for 0x80 to 0x9F. Not through TextDecoder: Node 20's reads it as
 * ISO-8859-1 (0x80 gives U+0080, not the euro sign).
 */
function fromWindows1252(bytes: Uint8Array): Uint8Array {
  if (isAscii(bytes)) return bytes;
  const text = latin1Text(bytes).replace(/[\u0080-\u009f]/g, (c) => WINDOWS_1252_C1[c.charCodeAt(0) - 0x80]!);
  return Buffer.from(text, "utf8");
}

function latin1Text(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("latin1");
}

function notIn(charset: string): Fault {
  return new Fault("invalid", `The script is not valid ${charset}, the charset of its Content-Type`);
}
