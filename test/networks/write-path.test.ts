import type { JsonObject } from "@bufbuild/protobuf";
import { expect } from "chai";
import { join } from "node:path";
import { NetworkCatalog } from "../../src/networks/catalog.js";
import { KeyedMutex } from "../../src/networks/keyed-mutex.js";
import type { NetworkInput, RevisionStatus } from "../../src/networks/model.js";
import { indexEntryOf } from "../../src/networks/search/search-entry.js";
import { revisionJson } from "../../src/networks/store.js";
import { fold, foldByRegex, sortedWords, words } from "../../src/networks/search/text.js";
import { openTempCatalog } from "./support.js";

/**
 * The write path's shortcuts must not show: one JSON text shared by a document and its revision,
 * index entries reused across changes of state alone, index changes applied while the next write is
 * in flight, and a mutex that starts work on a free key at once.
 */

const en = (value: string) => [{ lang: "en", value }];

function input(i: number, extra: NetworkInput = {}): NetworkInput {
  return {
    name: [
      { lang: "en", value: `Health cohort ${i}` },
      { lang: "fr", value: `Réseau santé ${i}` },
    ],
    acronym: en(`HC${i}`),
    description: en(`<p>About <b>birth</b> ${i}</p>`),
    studyIds: [`s${i % 3}`],
    model: { country: ["CA", "FR"][i % 2]!, size: i, tags: [i, "x"] },
    ...extra,
  };
}

describe("network catalogue write path", () => {
  let t: Awaited<ReturnType<typeof openTempCatalog>>;
  beforeEach(async () => {
    t = await openTempCatalog();
  });
  afterEach(async () => {
    await t.dispose();
  });

  it("writes a revision as JSON.stringify would", () => {
    const document = {
      id: "a",
      name: en('A "quoted" ☃'),
      acronym: [],
      description: [],
      model: { k: [1, null] },
      studyIds: [],
      studySummaries: [],
      memberships: [],
      networkIds: [],
    };
    const json = JSON.stringify(document);
    for (const comment of [undefined, "", 'a "comment"\n']) {
      const record = { seq: 12, author: 'al"ice', date: "2026-01-02T03:04:05.000Z", ...(comment ? { comment } : {}), document };
      expect(revisionJson(12, 'al"ice', "2026-01-02T03:04:05.000Z", comment, json)).to.equal(JSON.stringify(record));
    }
  });

  it("stores after every kind of change the index entry computed afresh, and the document once per save", async () => {
    let c = t.catalog;
    await c.create(input(1, { id: "a" }), "alice", "made");
    await c.update("a", input(2), "bob");
    await c.updateModel("a", { size: 3 }, "carol");
    await c.publish("a", "rita");
    await c.setStatus("a", "UNDER_REVIEW");
    await c.unpublish("a");
    await c.setStatus("a", "DELETED");
    await c.publish("a", "rita");
    await c.restore("a", "1", "dan");
    for (const check of ["live", "reopened"]) {
      const record = c.get("a");
      expect(await c.storedEntry("a"), check).to.deep.equal(indexEntryOf(record));
      const revisions = (await c.revisions("a")).map((r) => r.revision);
      expect(
        revisions.map((r) => [r.seq, r.author, r.comment ?? null]),
        check,
      ).to.deep.equal([
        [4, "dan", "Restored revision 1"],
        [3, "carol", null],
        [2, "bob", null],
        [1, "alice", "made"],
      ]);
      expect(revisions[0]!.document, check).to.deep.equal(record.document);
      expect(record.state, check).to.deep.include({ head: 4, revisionsAhead: 1, publishedTag: "2", publishedId: "3" });
      await c.close();
      c = t.catalog = await NetworkCatalog.open(join(t.dir, "networks"));
      expect(c.get("a"), check).to.deep.equal(record);
    }
  });

  it("reuses the entry of an unchanged document only where it equals the entry computed afresh", async () => {
    const r = await t.catalog.create(input(1, { id: "a" }), "alice");
    const before = { record: r, entry: indexEntryOf(r) };
    for (const state of [
      { ...r.state, revisionStatus: "UNDER_REVIEW" as RevisionStatus },
      { ...r.state, publishedTag: "1", publishedId: "1", revisionsAhead: 0 },
      { ...r.state, lastUpdate: "2030-01-01T00:00:00.000Z" },
      r.state,
    ]) {
      const record = { document: r.document, state };
      const reused = indexEntryOf(record, before);
      expect(reused).to.deep.equal(indexEntryOf(record));
      expect(JSON.stringify(reused)).to.equal(JSON.stringify(indexEntryOf(record)));
      expect(reused.words).to.equal(before.entry.words);
    }
    // Another document (even equal in content) is indexed afresh, but for the words of the same texts.
    const other = { document: { ...r.document, name: en("Other") }, state: r.state };
    expect(indexEntryOf(other, before)).to.deep.equal(indexEntryOf(other));
    expect(indexEntryOf(other, before).words).to.not.equal(before.entry.words);
    const sameTexts = { document: { ...r.document, name: r.document.name.map((l) => ({ ...l })), model: { size: 9 } }, state: r.state };
    const reused = indexEntryOf(sameTexts, before);
    expect(reused).to.deep.equal(indexEntryOf(sameTexts));
    expect(reused.words).to.equal(before.entry.words);
    for (const name of [
      en("Health cohort 1"),
      [...r.document.name].reverse(),
      [
        { lang: "en", value: "Health cohort 1" },
        { lang: "fr", value: "Réseau santé 2" },
      ],
    ]) {
      const changed = { document: { ...r.document, name }, state: r.state };
      expect(indexEntryOf(changed, before), JSON.stringify(name)).to.deep.equal(indexEntryOf(changed));
    }
  });

  it("answers lists exactly while writes are in flight and their index changes pending", async () => {
    const c = t.catalog;
    for (let i = 0; i < 32; i++) await c.create(input(i, { id: `n${i}` }), "alice");
    // Warm the maintained orders and lazy dictionaries, so that pending changes must move them.
    const params = [
      { sort: "name.en", limit: 50 },
      { sort: "lastModifiedDate", order: "desc", limit: 50 },
      { query: "like(name.fr,*sante 1*)", limit: 50 },
      { query: "exists(model.tags)", limit: 50 },
      { query: "match(heal*)", filter: "PUBLISHED", limit: 50 },
      { query: "eq(model.country,FR)", study: "s1", limit: 50 },
      { filter: "UNDER_REVIEW", limit: 50 },
    ];
    const snapshot = () => params.map((p) => c.list(p)).map((r) => ({ ids: r.page.map((x) => x.document.id), total: r.total }));
    snapshot();
    const writes: Promise<unknown>[] = [];
    // Each check runs as its write is answered: that change is still pending in the index (and, the
    // writes being concurrent, others are in flight), so the list must apply it before answering.
    const finds = (query: string, params = {}) => c.list({ query, ...params }).total === 1;
    for (let i = 0; i < 30; i++) {
      const id = `n${i}`;
      if (i % 3 === 0) {
        const model: JsonObject = i % 2 ? {} : { country: "FR", tags: [] };
        writes.push(
          c.update(id, input(i + 100, { model }), "bob").then(() => {
            expect(finds(`and(eq(id,${id}),match(sante ${i + 100}))`, { sort: "name.en" }), id).to.equal(true);
            expect(finds(`and(eq(id,${id}),exists(model.tags))`), id).to.equal(false);
            snapshot();
          }),
        );
      } else if (i % 3 === 1) {
        writes.push(
          c.publish(id, "rita").then(() => {
            expect(finds(`eq(id,${id})`, { filter: "PUBLISHED", sort: "lastModifiedDate", order: "desc" }), id).to.equal(true);
            snapshot();
          }),
        );
      } else {
        writes.push(
          c.setStatus(id, "UNDER_REVIEW").then(() => {
            expect(finds(`and(eq(id,${id}),eq(revisionStatus,UNDER_REVIEW))`, { filter: "UNDER_REVIEW" }), id).to.equal(true);
            snapshot();
          }),
        );
      }
      if (i === 10) {
        writes.push(
          c.delete("n31").then(async () => {
            expect(c.list({ query: "eq(id,n31)" }).total).to.equal(0);
            await c.create(input(31, { id: "n31", name: en("Zeta") }), "eve");
            expect(finds("and(eq(id,n31),like(name.en,zet*))", { sort: "name.en" })).to.equal(true);
          }),
        );
      }
      if (i % 7 === 0) await new Promise((r) => setImmediate(r));
    }
    await Promise.all(writes);
    const live = snapshot();
    await c.rebuildIndex();
    expect(snapshot()).to.deep.equal(live);
    await c.close();
    t.catalog = await NetworkCatalog.open(join(t.dir, "networks"));
    const reopened = params.map((p) => t.catalog.list(p)).map((r) => ({ ids: r.page.map((x) => x.document.id), total: r.total }));
    expect(reopened).to.deep.equal(live);
    expect(live[4]!.total).to.be.greaterThan(0);
    expect(live[6]!.total).to.be.greaterThan(0);
  });
});

describe("KeyedMutex", () => {
  it("starts work on a free key at once and runs work on a held key after it, failures included", async () => {
    const m = new KeyedMutex();
    const log: string[] = [];
    const first = m.run("k", async () => {
      log.push("first starts");
      await new Promise((r) => setTimeout(r, 5));
      log.push("first ends");
      throw new Error("boom");
    });
    expect(log).to.deep.equal(["first starts"]);
    const second = m.run("k", async () => {
      log.push("second runs");
      return 2;
    });
    const other = m.run("other", async () => {
      log.push("other runs");
      return 3;
    });
    expect(log).to.deep.equal(["first starts", "other runs"]);
    await first.catch(() => undefined);
    expect(await second).to.equal(2);
    expect(await other).to.equal(3);
    expect(log).to.deep.equal(["first starts", "other runs", "first ends", "second runs"]);
    expect(await m.run("k", () => Promise.resolve(4))).to.equal(4);
    let threw: unknown;
    await m
      .run("k", () => {
        throw new Error("sync");
      })
      .catch((e: unknown) => (threw = e));
    expect((threw as Error).message).to.equal("sync");
  });
});

describe("words", () => {
  it("are the folded runs of letters and digits outside tags, sorted and distinct for entries", () => {
    expect(words("Santé <b>publique</b>, SANTE 2 x² e\u0301cole")).to.deep.equal(["sante", "publique", "sante", "2", "x²", "ecole"]);
    expect(sortedWords("b a B <i>a</i> é e")).to.deep.equal(["a", "b", "e"]);
    expect(words("")).to.deep.equal([]);
  });

  it("fold and split as their regular-expression definitions do, on any text", () => {
    const wordsByRegex = (text: string) => foldByRegex(text.replace(/<[^>]*>/g, " ")).match(/[\p{L}\p{N}]+/gu) ?? [];
    // Pieces that take every branch of the scans: ASCII, Latin accents precomposed and decomposed,
    // marks outside U+0300–U+036F, letters without ASCII folding, other scripts, a final sigma,
    // surrogate pairs and lone surrogates, tags and stray brackets, separators.
    const pieces = [
      "a",
      "Z",
      "7",
      " ",
      "-",
      ".",
      "'",
      "<",
      ">",
      "<b>",
      "é",
      "E\u0301",
      "\u0327",
      "\u0300\u0301",
      "ß",
      "ø",
      "Æ",
      "İ",
      "K",
      "ΑΣ",
      "Σ",
      "ς",
      "д",
      "Ж",
      "\u05b0",
      "\u0903",
      "\u20dd",
      "\u3099",
      "か\u3099",
      "ｶ",
      "²",
      "Ⅻ",
      "𝔘",
      "😀",
      "\ud800",
      "\udfff",
      "ª",
      "\u00a0",
      "\u200b",
    ];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let n = 0; n < 3000; n++) {
      let text = "";
      const length = Math.floor(next() * 12);
      for (let k = 0; k < length; k++) text += pieces[Math.floor(next() * pieces.length)];
      expect(fold(text), JSON.stringify(text)).to.equal(foldByRegex(text));
      expect(words(text), JSON.stringify(text)).to.deep.equal(wordsByRegex(text));
      const sorted = [...new Set(wordsByRegex(text))].sort();
      expect(sortedWords(text), JSON.stringify(text)).to.deep.equal(sorted);
    }
    const long = Array.from({ length: 200 }, (_, k) => `Word${(k * 7919) % 61} é${k % 5}`).join(" ");
    expect(sortedWords(long)).to.deep.equal([...new Set(wordsByRegex(long))].sort());
  });
});
