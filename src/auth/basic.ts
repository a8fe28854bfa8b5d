import { Fault } from "../errors/fault.js";

export interface BasicCredentials {
  readonly name: string;
  readonly password: string;
}

/** The realm of the Basic challenge every 401 carries. */
export const AUTH_REALM = "rock";

/** 401, with the challenge that asks for Basic credentials (HTTP requires one on every 401). */
export function unauthenticated(message: string): Fault {
  return new Fault("unauthenticated", message, { challenge: `Basic realm="${AUTH_REALM}"` });
}

const BASIC_SCHEME = /^basic(?:$|\s)/i;
const BASIC = /^basic +(\S+)$/i;
/** Standard base64 with exactly the padding it needs, nothing else (RFC 4648 §4). */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// RFC 7617 §2: neither part may hold control characters.
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const CONTROL = /[\u0000-\u001f\u007f]/;
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * `Basic base64(name:password)`, strictly: undefined when the header is absent or of another scheme;
 * a Basic header that is not exactly canonical base64 of UTF-8 `name:password` with a name is
 * refused (401) rather than decoded leniently or taken as anonymous.
 */
export function parseBasic(header: string | null): BasicCredentials | undefined {
  if (header === null || !BASIC_SCHEME.test(header)) return undefined;
  const token = BASIC.exec(header)?.[1];
  if (token === undefined || !BASE64.test(token)) throw malformed("expected one canonical base64 token after 'Basic '");
  const bytes = Buffer.from(token, "base64");
  // Non-zero bits after the last byte are not canonical (two texts would mean the same credentials).
  if (bytes.toString("base64") !== token) throw malformed("expected one canonical base64 token after 'Basic '");
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    throw malformed("not UTF-8");
  }
  const colon = text.indexOf(":");
  if (colon < 0) throw malformed("expected user:password");
  if (colon === 0) throw malformed("empty user name");
  if (CONTROL.test(text)) throw malformed("control characters");
  return { name: text.slice(0, colon), password: text.slice(colon + 1) };
}

function malformed(why: string): Fault {
  return unauthenticated(`Malformed Basic credentials: ${why}`);
}
