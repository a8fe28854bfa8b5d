/**
 * Input limits of the catalogue, in one place. Each one turns an input that used to stall the server,
 * fail with a 500 or be stored in a form that some reader could not read back into a 400 that says
 * which limit was passed.
 */

/** UTF-8 bytes of a network document as stored; keeps a diff of two documents well within gRPC's 4 MiB. */
export const MAX_DOCUMENT_BYTES = 1024 * 1024;

/**
 * Nesting of the model and of each study summary and membership, the top object being level 1.
 * Protobuf decoders stop at 100 nested messages (protoc, protobufjs, protobuf-es); in a
 * google.protobuf.Struct every JSON object costs three (Struct, map entry, Value), and the deepest
 * answer, a diff of study summaries, starts eight messages down: 8 + 3 × 30 = 98.
 */
export const MAX_JSON_DEPTH = 30;

/**
 * Objects, arrays and scalars in the model, in all study summaries, in all memberships (each counted
 * apart). Bounds the work of indexing a save, and the growth from JSON to Struct (a one-byte `1,`
 * becomes eleven bytes).
 */
export const MAX_JSON_VALUES = 10_000;

/** Characters of a revision comment: every comment comes back in each revision list. */
export const MAX_COMMENT_CHARS = 1000;

/** Characters of an RQL query. */
export const MAX_QUERY_CHARS = 4096;

/** Nested parentheses in an RQL query (the parser and the query compiler recurse once per level). */
export const MAX_QUERY_DEPTH = 32;

/** Characters of a `like` pattern or a `match` text. */
export const MAX_PATTERN_CHARS = 256;

/** Ids in a list's `exclude`, after splitting at commas. */
export const MAX_EXCLUDED_IDS = 10_000;

const MAX_ECHO_CHARS = 100;

/**
 * The start of a caller's text, to quote in an error message. gRPC carries the message in a header,
 * so quoting a megabyte id whole made the answer itself fail.
 */
export function excerpt(text: string): string {
  return text.length <= MAX_ECHO_CHARS ? text : `${text.slice(0, MAX_ECHO_CHARS)}…`;
}
