/** Plain-text tables: one per section, a row per figure with its reference, ratio and target. */

export type Verdict = "pass" | "FAIL" | "";

export interface Row {
  readonly figure: string;
  readonly value: string;
  readonly reference?: string;
  readonly ratio?: string;
  readonly target?: string;
  readonly verdict?: Verdict;
}

export interface Section {
  readonly title: string;
  readonly rows: Row[];
  readonly notes: string[];
}

export function section(title: string): Section {
  return { title, rows: [], notes: [] };
}

export const ms = (x: number): string => (x < 1 ? `${(x * 1000).toFixed(0)} µs` : x < 100 ? `${x.toFixed(2)} ms` : `${x.toFixed(0)} ms`);
export const perSecond = (x: number): string => `${Math.round(x).toLocaleString("en-US")}/s`;
export const mbps = (x: number): string => `${x.toFixed(0)} MB/s`;
export const mib = (bytes: number): string => `${(bytes / 1048576).toFixed(0)} MiB`;
export const times = (x: number): string => `${x.toFixed(2)}×`;
export const percent = (x: number): string => `${(x * 100).toFixed(0)}%`;

export function verdict(ok: boolean): Verdict {
  return ok ? "pass" : "FAIL";
}

const MARK: Record<Verdict, string> = { pass: "✔", FAIL: "✘", "": "" };
const HEAD: readonly (keyof Row)[] = ["figure", "value", "reference", "ratio", "target", "verdict"];
const LABELS: Record<keyof Row, string> = {
  figure: "figure",
  value: "measured",
  reference: "reference",
  ratio: "ratio",
  target: "target",
  verdict: "",
};

export function render(s: Section): string {
  const shown = (r: Row, k: keyof Row): string => (k === "verdict" ? MARK[r.verdict ?? ""] : (r[k] ?? ""));
  const cells = [HEAD.map((k) => LABELS[k]), ...s.rows.map((r) => HEAD.map((k) => shown(r, k)))];
  const widths = HEAD.map((_, c) => Math.max(...cells.map((row) => row[c]!.length)));
  const line = (row: string[]) => `| ${row.map((v, c) => v.padEnd(widths[c]!)).join(" | ")} |`;
  const rule = `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`;
  const out = [`\n## ${s.title}\n`, line(cells[0]!), rule, ...cells.slice(1).map(line)];
  for (const n of s.notes) out.push(`  - ${n}`);
  return out.join("\n");
}
