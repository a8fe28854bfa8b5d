import { expect } from "chai";
import { SortedChunks, SortedKeys } from "../../src/networks/search/sorted-keys.js";

// A small deterministic generator, so that a failure replays the same way.
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

describe("sorted chunks", () => {
  it("stay in order across insertions and removals that split and empty chunks", () => {
    const rand = random(11);
    const key = () => `k${Math.floor(rand() * 6000)}`;
    const reference = new Set<string>();
    const initial = Array.from({ length: 1500 }, key);
    for (const k of initial) reference.add(k);
    const list = new SortedChunks(byCodeUnits, [...reference].sort());
    for (let step = 0; step < 20_000; step++) {
      const k = key();
      // Removals dominate in one stretch, so that chunks empty and the list shrinks to nearly nothing.
      const removing = step > 8000 && step < 16_000 ? rand() < 0.9 : rand() < 0.4;
      if (removing) {
        list.remove(k);
        reference.delete(k);
      } else if (!reference.has(k)) {
        list.insert(k);
        reference.add(k);
      }
      if (step % 997 === 0) {
        const sorted = [...reference].sort();
        expect([...list.from()], `step ${step}`).to.deep.equal(sorted);
        const start = key();
        expect([...list.from(start)], `step ${step} from ${start}`).to.deep.equal(sorted.filter((s) => s >= start));
      }
    }
    expect([...list.from()]).to.deep.equal([...reference].sort());
  });

  it("find the place of an item when whole chunks were emptied before it", () => {
    const keys = Array.from({ length: 2000 }, (_, i) => `k${String(i).padStart(5, "0")}`);
    const list = new SortedChunks(byCodeUnits, keys);
    for (const k of keys.slice(0, 1200)) list.remove(k);
    list.insert("k99999");
    list.insert("k00000");
    list.insert("k01500x");
    expect([...list.from()]).to.deep.equal(["k00000", ...keys.slice(1200, 1501), "k01500x", ...keys.slice(1501), "k99999"]);
    expect([...list.from("k01999")]).to.deep.equal(["k01999", "k99999"]);
  });

  it("answer prefix ranges of a dictionary as it changes", () => {
    const dictionary = new Set(Array.from({ length: 3000 }, (_, i) => `w${(i * 7919) % 5000}`));
    const keys = new SortedKeys();
    const prefixed = (p: string) => [...dictionary].filter((k) => k.startsWith(p)).sort();
    expect([...keys.withPrefix("w12", () => dictionary)]).to.deep.equal(prefixed("w12"));
    for (let i = 0; i < 2000; i++) {
      const k = `w${(i * 104729) % 6000}`;
      if (dictionary.has(k)) {
        dictionary.delete(k);
        keys.removed(k);
      } else {
        dictionary.add(k);
        keys.added(k);
      }
    }
    for (const p of ["", "w", "w1", "w12", "w599", "x"]) expect([...keys.withPrefix(p, () => dictionary)], p).to.deep.equal(prefixed(p));
  });
});
