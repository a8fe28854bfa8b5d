/** The package ships no types: what test/server/metrics.test.ts reads of its output. */
declare module "parse-prometheus-text-format" {
  export interface Sample {
    readonly labels?: Record<string, string>;
    readonly value?: string;
    readonly count?: string;
    readonly sum?: string;
    readonly buckets?: Record<string, string>;
  }
  export interface Family {
    readonly name: string;
    readonly help: string;
    readonly type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
    readonly metrics: readonly Sample[];
  }
  export default function parse(text: string): Family[];
}
