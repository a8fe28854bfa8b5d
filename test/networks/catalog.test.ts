import { expect } from "chai";
import { NetworkCatalog } from "../../src/networks/catalog.js";
import type { NetworkInput } from "../../src/networks/model.js";
import { join } from "node:path";
import { openTempCatalog, rejection } from "./support.js";

const en = (value: string) => [{ lang: "en", value }];

function input(name: string, extra: NetworkInput = {}): NetworkInput {
  return { name: en(name), ...extra };
}

describe("network catalogue", () => {
  let t: Awaited<ReturnType<typeof openTempCatalog>>;
  beforeEach(async () => {
    t = await openTempCatalog();
  });
  afterEach(async () => {
    await t.dispose();
  });

  describe("create", () => {
    it("stores a normalized document with a first revision", async () => {
      const r = await t.catalog.create(
        {
          name: [
            { lang: "fr", value: "Réseau" },
            { lang: "en", value: "Network" },
            { lang: "de", value: "" },
          ],
          acronym: [{ lang: "en", value: "NW" }],
          model: { a: 1 },
        },
        "alice",
        "first",
      );
      expect(r.document.id).to.equal("nw");
      expect(r.document.name).to.deep.equal([
        { lang: "en", value: "Network" },
        { lang: "fr", value: "Réseau" },
      ]);
      expect(r.document.model).to.deep.equal({ a: 1 });
      expect(r.state).to.include({ revisionStatus: "DRAFT", revisionsAhead: 1, head: 1 });
      const revs = await t.catalog.revisions("nw");
      expect(revs.map((x) => [x.commitId, x.revision.author, x.revision.comment, x.isHead])).to.deep.equal([["1", "alice", "first", true]]);
    });

    it("refuses an existing id with AlreadyExists", async () => {
      await t.catalog.create(input("A", { id: "x" }), "alice");
      const e = await rejection(() => t.catalog.create(input("B", { id: "x" }), "alice"));
      expect(e.kind).to.equal("conflict");
      expect(t.catalog.get("x").document.name).to.deep.equal(en("A"));
    });

    it("requires a name", async () => {
      for (const name of [undefined, [], [{ lang: "en", value: "" }]]) {
        const e = await rejection(() => t.catalog.create({ id: "x", ...(name ? { name } : {}) }, "alice"));
        expect(e.kind).to.equal("invalid");
        expect(e.message).to.contain("name");
      }
      expect(t.catalog.size).to.equal(0);
    });

    it("derives ids with -1, -2 on collisions, also for concurrent creations", async () => {
      const made = await Promise.all([1, 2, 3].map(() => t.catalog.create(input("Health Network"), "alice")));
      expect(made.map((r) => r.document.id).sort()).to.deep.equal(["hn", "hn-1", "hn-2"]);
      const fromAcronyms = await t.catalog.create(
        {
          name: en("x"),
          acronym: [
            { lang: "fr", value: "Réseau Santé" },
            { lang: "en", value: "R&D net" },
          ],
        },
        "alice",
      );
      expect(fromAcronyms.document.id).to.equal("r_d-net-reseau-sante");
    });
  });

  describe("update and model", () => {
    it("replaces the document, keeps creation time, adds revisions", async () => {
      const c = await t.catalog.create(input("One", { id: "n", studyIds: ["s1"] }), "alice");
      const u = await t.catalog.update("n", input("Two"), "bob", "renamed");
      expect(u.document.name).to.deep.equal(en("Two"));
      expect(u.document.studyIds).to.deep.equal([]);
      expect(u.state.created).to.equal(c.state.created);
      expect(u.state.revisionsAhead).to.equal(2);
      await t.catalog.updateModel("n", { k: [1, 2] }, "carl");
      expect(t.catalog.get("n").document.model).to.deep.equal({ k: [1, 2] });
      expect(t.catalog.get("n").document.name).to.deep.equal(en("Two"));
      const revs = await t.catalog.revisions("n");
      expect(revs.map((r) => [r.commitId, r.revision.author, r.revision.comment ?? null])).to.deep.equal([
        ["3", "carl", null],
        ["2", "bob", "renamed"],
        ["1", "alice", null],
      ]);
    });

    it("refuses a body id that differs from the path id", async () => {
      await t.catalog.create(input("One", { id: "n" }), "alice");
      const e = await rejection(() => t.catalog.update("n", input("Two", { id: "m" }), "alice"));
      expect(e.kind).to.equal("invalid");
      await t.catalog.update("n", input("Two", { id: "n" }), "alice");
    });

    it("answers NotFound for every operation on a missing network", async () => {
      const ops: (() => unknown)[] = [
        () => t.catalog.get("nope"),
        () => t.catalog.update("nope", input("x"), "a"),
        () => t.catalog.updateModel("nope", {}, "a"),
        () => t.catalog.setStatus("nope", "DRAFT"),
        () => t.catalog.publish("nope", "a"),
        () => t.catalog.unpublish("nope"),
        () => t.catalog.delete("nope"),
        () => t.catalog.revisions("nope"),
        () => t.catalog.revision("nope", "1"),
        () => t.catalog.restore("nope", "1", "a"),
        () => t.catalog.diff("nope", "1", "1"),
        () => t.catalog.indexNetwork("nope"),
        () => t.catalog.shareKey("nope", "2999-01-01"),
      ];
      for (const op of ops) expect((await rejection(op)).kind).to.equal("not_found");
    });

    it("does not lose any of 20 concurrent saves", async () => {
      await t.catalog.create(input("C", { id: "c" }), "alice");
      await Promise.all(Array.from({ length: 20 }, (_, i) => t.catalog.update("c", input(`C${i}`), `u${i}`)));
      expect(t.catalog.get("c").state.revisionsAhead).to.equal(21);
      expect(await t.catalog.revisions("c")).to.have.length(21);
    });
  });

  describe("state machine (reference §2.3)", () => {
    it("follows the table row by row", async () => {
      const c = await t.catalog.create(input("S", { id: "s" }), "alice");
      expect(c.state).to.deep.include({ revisionStatus: "DRAFT", revisionsAhead: 1 });
      expect(c.state.publishedTag).to.equal(undefined);

      let s = (await t.catalog.update("s", input("S2"), "a")).state;
      expect(s).to.deep.include({ revisionStatus: "DRAFT", revisionsAhead: 2 });

      s = (await t.catalog.setStatus("s", "UNDER_REVIEW")).state;
      expect(s).to.deep.include({ revisionStatus: "UNDER_REVIEW", revisionsAhead: 2 });
      s = (await t.catalog.updateModel("s", { x: 1 }, "a")).state;
      expect(s).to.deep.include({ revisionStatus: "UNDER_REVIEW", revisionsAhead: 3 });

      s = (await t.catalog.publish("s", "rita")).state;
      expect(s).to.deep.include({ revisionStatus: "DRAFT", revisionsAhead: 0, publishedTag: "1", publishedId: "3", publishedBy: "rita" });
      expect(s.publicationDate).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

      s = (await t.catalog.restore("s", "1", "a")).state;
      expect(s).to.deep.include({ revisionsAhead: 1, publishedTag: "1", publishedId: "3" });
      expect(t.catalog.get("s").document.name).to.deep.equal(en("S"));

      s = (await t.catalog.setStatus("s", "DELETED")).state;
      expect(s).to.deep.include({ revisionStatus: "DELETED", revisionsAhead: 1, publishedTag: "1" });

      s = (await t.catalog.publish("s", "alice")).state;
      expect(s).to.deep.include({ revisionStatus: "DRAFT", revisionsAhead: 0, publishedTag: "2", publishedId: "4", publishedBy: "alice" });

      s = (await t.catalog.unpublish("s")).state;
      expect(s).to.deep.include({ revisionStatus: "DRAFT", revisionsAhead: 0 });
      expect([s.publishedTag, s.publicationDate, s.publishedBy]).to.deep.equal([undefined, undefined, undefined]);

      await t.catalog.setStatus("s", "DELETED");
      await t.catalog.publish("s", "alice");
      s = (await t.catalog.unpublish("s")).state;
      expect(s).to.deep.include({ revisionStatus: "DRAFT", revisionsAhead: 0 }, "publish resets DELETED before unpublish");

      await t.catalog.publish("s", "alice");
      await t.catalog.setStatus("s", "DELETED");
      s = (await t.catalog.unpublish("s")).state;
      expect(s).to.deep.include({ revisionStatus: "DELETED", revisionsAhead: 0 });

      s = (await t.catalog.publish("s", "alice")).state;
      expect(s.publishedTag).to.equal("5", "tags are never reused");
    });

    it("marks the published revision in the history", async () => {
      await t.catalog.create(input("P", { id: "p" }), "alice");
      await t.catalog.publish("p", "alice");
      await t.catalog.update("p", input("P2"), "alice");
      const revs = await t.catalog.revisions("p");
      expect(revs.map((r) => [r.commitId, r.isHead, r.isPublished])).to.deep.equal([
        ["2", true, false],
        ["1", false, true],
      ]);
    });
  });

  describe("revisions", () => {
    it("views, diffs and restores", async () => {
      await t.catalog.create(input("D", { id: "d", studyIds: ["s1"], model: { a: 1 } }), "alice");
      await t.catalog.update("d", input("D", { studyIds: ["s1", "s2"], model: { a: 2 } }), "alice");
      expect((await t.catalog.revision("d", "1")).document.model).to.deep.equal({ a: 1 });
      expect(await t.catalog.diff("d", "1", "2")).to.deep.equal({ studyIds: [["s1"], ["s1", "s2"]], model: [{ a: 1 }, { a: 2 }] });
      expect(await t.catalog.diff("d", "2", "2")).to.deep.equal({});
      for (const bad of ["0", "3", "x", "01"]) expect((await rejection(() => t.catalog.revision("d", bad))).kind).to.equal("not_found");
      await t.catalog.restore("d", "1", "bob");
      const head = t.catalog.get("d");
      expect(head.document.model).to.deep.equal({ a: 1 });
      expect(head.state.head).to.equal(3);
      expect((await t.catalog.revisions("d"))[0]!.revision.comment).to.equal("Restored revision 1");
    });
  });

  describe("delete", () => {
    it("refuses while another network includes it, with the referrers in the body", async () => {
      await t.catalog.create(input("Child", { id: "child" }), "a");
      await t.catalog.create(input("P1", { id: "p1", networkIds: ["child"] }), "a");
      await t.catalog.create(input("P0", { id: "p0", networkIds: ["child", "x"] }), "a");
      const e = await rejection(() => t.catalog.delete("child"));
      expect(e.kind).to.equal("conflict");
      expect(e.details.body).to.deep.equal({ network: ["p0", "p1"] });
      await t.catalog.delete("p0");
      await t.catalog.delete("p1");
      await t.catalog.delete("child");
      expect(t.catalog.size).to.equal(0);
    });

    it("removes published networks and their history; the id can be reused", async () => {
      await t.catalog.create(input("G", { id: "g" }), "a");
      await t.catalog.update("g", input("G2"), "a");
      await t.catalog.publish("g", "a");
      await t.catalog.delete("g");
      expect((await rejection(() => t.catalog.get("g"))).kind).to.equal("not_found");
      const again = await t.catalog.create(input("G3", { id: "g" }), "a");
      expect(again.state.publishedTag).to.equal(undefined);
      expect(await t.catalog.revisions("g")).to.have.length(1);
    });
  });

  it("reopens with documents, history, state, index and share-key secret intact", async () => {
    await t.catalog.create(input("Health Network", { id: "h", model: { k: "v" } }), "alice");
    await t.catalog.update("h", input("Health Network", { model: { k: "w" }, studyIds: ["s"] }), "bob", "c2");
    await t.catalog.publish("h", "rita");
    const key = t.catalog.shareKey("h", "2999-01-01");
    const before = t.catalog.get("h");
    await t.catalog.close();
    const reopened = await NetworkCatalog.open(join(t.dir, "networks"));
    t.catalog = reopened;
    expect(reopened.get("h")).to.deep.equal(before);
    expect((await reopened.revisions("h")).map((r) => r.revision.comment ?? null)).to.deep.equal(["c2", null]);
    expect(reopened.list({ query: "match(heal*)" }).page.map((r) => r.document.id)).to.deep.equal(["h"]);
    expect(reopened.shareKeyGrants(key, "h")).to.equal(true);
  });

  it("rebuilds index entries equal to those written with the documents", async () => {
    await t.catalog.create(input("Alpha", { id: "a", model: { x: { y: [1, 2] } } }), "a");
    await t.catalog.create(input("Beta", { id: "b" }), "a");
    const before = [await t.catalog.storedEntry("a"), await t.catalog.storedEntry("b")];
    expect(before[0]!.fields["model.x.y"]).to.deep.equal([1, 2]);
    await t.catalog.rebuildIndex();
    await t.catalog.indexNetwork("a");
    expect([await t.catalog.storedEntry("a"), await t.catalog.storedEntry("b")]).to.deep.equal(before);
  });
});
