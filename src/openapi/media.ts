import type { Content, MediaType } from "./types.js";

const BINARY: MediaType = { schema: { type: "string", format: "binary" } };

/** Raw (HttpBody) bodies of this API by media type; anything else is opaque bytes. */
const RAW: Readonly<Record<string, MediaType>> = {
  "application/json": { schema: { description: "Any JSON value." } },
  "application/x-rscript": { schema: { type: "string", description: "R code." }, example: "summary(1:10)" },
  "application/x-rdata": { schema: { type: "string", contentEncoding: "base64", description: "Base64 of `serialize(value, NULL)`." } },
  "text/plain": { schema: { type: "string" } },
};

export const DEFAULT_RAW_MEDIA = ["application/octet-stream"];

export function rawContent(mediaTypes: readonly string[]): Content {
  return Object.fromEntries(mediaTypes.map((t) => [t, RAW[t] ?? BINARY]));
}
