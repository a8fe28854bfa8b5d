/**
 * The gRPC spec's percent-encoding of `grpc-message`: every byte of the UTF-8 text outside printable
 * ASCII (0x20–0x7E), and `%` itself, as `%XX`. Connect-ES uses encodeURIComponent, which also encodes
 * `/`, `:` and the like; grpc-js reads the value with decodeURI, which leaves those as `%2F`, `%3A`.
 * Encoding only what the spec asks for reads back verbatim with either decoder.
 */
export function encodeGrpcMessage(text: string): string {
  let plain = true;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) {
      plain = false;
      break;
    }
  }
  if (plain) return text;
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    out += byte < 0x20 || byte > 0x7e || byte === 0x25 ? `%${byte.toString(16).toUpperCase().padStart(2, "0")}` : String.fromCharCode(byte);
  }
  return out;
}
