import { Code, ConnectError } from "@connectrpc/connect";

/**
 * google.api.http path templates: literal segments, `{field}` (one segment), `{field=*}` and
 * `{field=**}` (the rest of the path). Compiled once; matching is a walk over the split path.
 */
export type Segment =
  | { readonly kind: "literal"; readonly text: string }
  | { readonly kind: "var"; readonly field: string; readonly rest: boolean };

export interface PathTemplate {
  readonly source: string;
  readonly segments: readonly Segment[];
  /** Literal segments count first when two templates match the same path. */
  readonly literalCount: number;
}

export function parsePathTemplate(source: string): PathTemplate {
  if (!source.startsWith("/")) throw new Error(`path template must start with '/': ${source}`);
  const segments: Segment[] = [];
  for (const part of source.slice(1).split("/")) {
    const v = /^\{([a-z_][a-z0-9_.]*)(?:=(\*\*?))?\}$/i.exec(part);
    if (v) segments.push({ kind: "var", field: v[1]!, rest: v[2] === "**" });
    else if (/[{}*]/.test(part)) throw new Error(`unsupported path template segment '${part}' in ${source}`);
    else segments.push({ kind: "literal", text: part });
  }
  return { source, segments, literalCount: segments.filter((s) => s.kind === "literal").length };
}

/**
 * Path variables by field path, or undefined when the template does not match; `decode` turns a raw
 * segment into the variable's value (identity when only the shape matters).
 */
export function matchPath(t: PathTemplate, parts: readonly string[], decode: (segment: string) => string = decodeSegment): Map<string, string> | undefined {
  let vars: Map<string, string> | undefined;
  const segs = t.segments;
  for (let i = 0; i < segs.length; i++) {
    const seg = segs[i]!;
    if (seg.kind === "literal") {
      if (parts[i] !== seg.text) return undefined;
      continue;
    }
    if (seg.rest) {
      if (i >= parts.length) return undefined;
      (vars ??= new Map()).set(seg.field, parts.slice(i).map(decode).join("/"));
      return vars;
    }
    const part = parts[i];
    if (part === undefined || part === "") return undefined;
    (vars ??= new Map()).set(seg.field, decode(part));
  }
  return parts.length === segs.length ? (vars ?? new Map()) : undefined;
}

function decodeSegment(s: string): string {
  if (!s.includes("%")) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    throw new ConnectError(`Malformed percent-encoding in path segment '${s}'`, Code.InvalidArgument);
  }
}
