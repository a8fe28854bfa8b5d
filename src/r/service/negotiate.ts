import type { ValueFormat } from "../wire/protocol.js";

export const OCTET_STREAM = "application/octet-stream";
export const JSON_TYPE = "application/json";

/** R serialization only when `application/octet-stream` is the first media type listed. */
export function negotiate(accept: string | undefined): ValueFormat {
  if (!accept) return "json";
  const comma = accept.indexOf(",");
  const first = comma < 0 ? accept : accept.slice(0, comma);
  const semicolon = first.indexOf(";");
  const type = (semicolon < 0 ? first : first.slice(0, semicolon)).trim().toLowerCase();
  return type === OCTET_STREAM ? "rds" : "json";
}

export function contentTypeOf(format: ValueFormat): string {
  return format === "rds" ? OCTET_STREAM : JSON_TYPE;
}
