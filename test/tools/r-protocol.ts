/**
 * The R side's constants of the protocol (gen/r/protocol.R, which worker.R reads), made from
 * src/r/wire/protocol-table.ts: written by gen-r-protocol.ts, compared by check-gen.ts.
 */
import {
  FIELDS,
  FROM_SERVER,
  FROM_SESSION,
  HEADER_BYTES,
  MARKER,
  MARKER_LEAD,
  ONE_READ,
  PROOF_FILE,
  TO_SERVER,
  TO_SESSION,
  VALUE_PIPE,
  type FrameSpec,
} from "../../src/r/wire/protocol-table.js";

/** The table's four directions, by the prefix of their names in worker.R. */
export const DIRECTIONS = {
  toServer: { title: "Node -> the R server (control socket)", frames: TO_SERVER },
  fromServer: { title: "The R server -> Node (control socket)", frames: FROM_SERVER },
  toSession: { title: "Node -> a session (main socket)", frames: TO_SESSION },
  fromSession: { title: "A session -> Node (main and output sockets)", frames: FROM_SESSION },
} as const;

const snake = (name: string): string => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const rString = (text: string): string => JSON.stringify(text);

function frameLines(direction: string, name: string, spec: FrameSpec): string[] {
  const constant = `${snake(direction)}_${snake(name)}`;
  const shape = [spec.fields.length === 1 ? `field: ${snake(spec.fields[0]!)}` : "", spec.body === undefined ? "" : `body: ${spec.body}`]
    .filter(Boolean)
    .join("; ");
  const lines = [`  ${constant} <- ${rString(spec.letter)} # ${spec.doc}${shape ? `; ${shape}` : ""}`];
  if (spec.fields.length > 1) lines.push(`  ${constant}_fields <- c(${spec.fields.map((field) => rString(snake(field))).join(", ")})`);
  return lines;
}

function block(): string {
  const lines = [
    "  # A frame: its letter, the payload's length (uint32, big endian), the payload: its fields, each a text",
    "  # ended by a NUL, in the order of <frame>_fields (a frame of one field is that field), then its body.",
    `  header_bytes <- ${HEADER_BYTES}L`,
    "  # R reads a socket 4096 bytes at a time: a request frame up to this size is taken in one read, even",
    "  # behind a drain frame.",
    `  one_read <- ${ONE_READ}L`,
    "  # Where an isolated session leaves its proof, in its home.",
    `  proof_file <- ${rString(PROOF_FILE)}`,
    "  # The FIFO large values go through, in a session's home.",
    `  value_pipe <- ${rString(VALUE_PIPE)}`,
  ];
  for (const [direction, { title, frames }] of Object.entries(DIRECTIONS)) {
    lines.push(`  # ${title}`);
    for (const [name, spec] of Object.entries<FrameSpec>(frames)) lines.push(...frameLines(direction, name, spec));
  }
  lines.push("  # Markers on a session's output stream: a byte printed text never holds, then the marker's type.");
  for (const [name, type] of Object.entries(MARKER)) lines.push(`  marker_${snake(name)} <- as.raw(c(${MARKER_LEAD}L, ${type}L))`);
  lines.push("  # The words of the fields that hold one of a few, by name.");
  for (const [field, kind] of Object.entries(FIELDS)) {
    if (typeof kind !== "string")
      lines.push(`  ${snake(field)}_words <- c(${kind.map((word) => `${word} = ${rString(word)}`).join(", ")})`);
  }
  return lines.join("\n");
}

/** gen/r/protocol.R: the constants worker.R reads into its environment before anything else. */
export function rProtocolFile(): string {
  const lines = block()
    .split("\n")
    .map((line) => line.replace(/^ {2}/, ""));
  return `# Made from src/r/wire/protocol-table.ts by \`npm run gen\`: edit the table there, not this file.\n${lines.join("\n")}\n`;
}
