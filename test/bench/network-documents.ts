import type { NetworkInput } from "../../src/networks/model.js";

const WORDS = ["health", "santé", "cohort", "birth", "ageing", "genetics", "nutrition", "réseau", "mental", "cancer"];

/** The i-th network of the benchmarks: two languages, accents, HTML, studies and a small model. */
export function benchDocument(i: number): NetworkInput {
  const w = (k: number) => WORDS[(i * 7 + k) % WORDS.length]!;
  return {
    name: [
      { lang: "en", value: `${w(0)} ${w(1)} network ${i}` },
      { lang: "fr", value: `Réseau ${w(2)} ${i}` },
    ],
    acronym: [{ lang: "en", value: `N${i}` }],
    description: [{ lang: "en", value: `<p>About ${w(3)} and ${w(4)} studies, number ${i}.</p>` }],
    studyIds: [`s${i % 50}`, `s${(i * 3) % 50}`],
    model: { country: ["CA", "FR", "DE"][i % 3]!, size: i % 100, contact: { email: `n${i}@example.org` } },
  };
}
