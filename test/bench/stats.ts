/** Timing helpers shared by the benchmark sections. */

export interface Summary {
  readonly n: number;
  /** Milliseconds. */
  readonly p50: number;
  readonly p95: number;
  readonly mean: number;
  readonly min: number;
  readonly max: number;
}

/** Nearest-rank percentiles of samples in milliseconds. */
export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) throw new Error("no samples");
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
  const total = sorted.reduce((s, x) => s + x, 0);
  return { n: sorted.length, p50: at(0.5), p95: at(0.95), mean: total / sorted.length, min: sorted[0]!, max: sorted[sorted.length - 1]! };
}

/** Runs `work` `warmup` times unmeasured, then `count` times one after the other; returns the durations (ms). */
export async function sample(count: number, warmup: number, work: (i: number) => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await work(i);
  const samples: number[] = new Array<number>(count);
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await work(i);
    samples[i] = performance.now() - start;
  }
  return samples;
}

/**
 * Samples several works in interleaved rounds: each runs `warmup` times, then every round runs each
 * work count/rounds times in turn. The machine's slow and fast phases (this VM's figures move by a
 * third between minutes) then weigh on every work alike, which one block per work does not ensure.
 */
export async function sampleInterleaved<K extends string>(
  works: Readonly<Record<K, () => Promise<unknown>>>,
  count: number,
  warmup: number,
  rounds = 10,
): Promise<Record<K, Summary>> {
  const keys = Object.keys(works) as K[];
  const samples = {} as Record<K, number[]>;
  for (const k of keys) {
    samples[k] = [];
    for (let i = 0; i < warmup; i++) await works[k]();
  }
  const perRound = Math.max(1, Math.ceil(count / rounds));
  for (let r = 0; r < rounds; r++) {
    for (const k of keys) samples[k].push(...(await sample(perRound, 0, works[k])));
  }
  const out = {} as Record<K, Summary>;
  for (const k of keys) out[k] = summarize(samples[k]);
  return out;
}

/** Operations per second of `count` sequential calls of `work`. */
export async function rate(count: number, work: (i: number) => Promise<unknown>): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < count; i++) await work(i);
  return (count / (performance.now() - start)) * 1000;
}

/** Operations per second of `lanes` concurrent loops, each calling `work` `perLane` times in sequence. */
export async function concurrentRate(lanes: number, perLane: number, work: (lane: number, i: number) => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      for (let i = 0; i < perLane; i++) await work(lane, i);
    }),
  );
  return ((lanes * perLane) / (performance.now() - start)) * 1000;
}

/** Samples `probe` every `everyMs` until stopped; keeps the peak. */
export class PeakSampler {
  private peakValue: number;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly probe: () => number,
    everyMs = 50,
  ) {
    this.peakValue = probe();
    this.timer = setInterval(() => this.take(), everyMs);
  }

  private take(): void {
    const v = this.probe();
    if (v > this.peakValue) this.peakValue = v;
  }

  stop(): number {
    clearInterval(this.timer);
    this.take();
    return this.peakValue;
  }
}
