import { Code, ConnectError } from "@connectrpc/connect";

/**
 * google.api.http path templates: literal segments, `{field}` (one segment), `{field=*}` and
 * `{field=**}` (the rest of the path: the template's last segment). Compiled once; the front router
 * matches paths against them, segment by segment (src/transport/router/route-trie.ts).
 */
export type Segment =
  | { readonly kind: "literal"; readonly text: string }
  | { readonly kind: "var"; readonly field: string; readonly rest: boolean };

export interface PathTemplate {
  readonly source: string;
  readonly segments: readonly Segment[];
}

export function parsePathTemplate(source: string): PathTemplate {
  if (!source.startsWith("/")) throw new Error(`path template must start with '/': ${source}`);
  const segments: Segment[] = [];
  for (const part of source.slice(1).split("/")) {
    const last = segments.at(-1);
    if (last?.kind === "var" && last.rest) throw new Error(`'**' must be the last segment of a path template: ${source}`);
    const v = /^\{([a-z_][a-z0-9_.]*)(?:=(\*\*?))?\}$/i.exec(part);
    if (v) segments.push({ kind: "var", field: v[1]!, rest: v[2] === "**" });
    else if (/[{}*]/.test(part)) throw new Error(`unsupported path template segment '${part}' in ${source}`);
    else segments.push({ kind: "literal", text: part });
  }
  return { source, segments };
}

/**
 * The path variables of a path the template matched, by field path, each segment percent-decoded
 * (a `**` variable's segments joined by `/` again).
 */
export function pathVars(t: PathTemplate, parts: readonly string[]): Map<string, string> {
  const vars = new Map<string, string>();
  const segs = t.segments;
  for (let i = 0; i < segs.length; i++) {
    const seg = segs[i]!;
    if (seg.kind === "literal") continue;
    vars.set(seg.field, seg.rest ? parts.slice(i).map(decodeSegment).join("/") : decodeSegment(parts[i]!));
  }
  return vars;
}

function decodeSegment(s: string): string {
  if (!s.includes("%")) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    throw new ConnectError(`Malformed percent-encoding in path segment '${s}'`, Code.InvalidArgument);
  }
}
