import { expect } from "chai";
import { parseRql, RqlSyntaxError } from "../../src/networks/search/rql.js";
import type { NetworkInput } from "../../src/networks/model.js";
import { openTempCatalog, rejection } from "./support.js";

const ids = (r: { page: readonly { document: { id: string } }[] }) => r.page.map((x) => x.document.id);

describe("RQL parser", () => {
  it("reads calls, FIQL, arrays, quoted strings, percent-encoding and typed values", () => {
    expect(parseRql("and(eq(id,a),in(studyIds,(s1,s2)))")).to.deep.equal({
      kind: "call",
      op: "and",
      at: 0,
      args: [
        { kind: "call", op: "eq", args: ["id", "a"], at: 4 },
        { kind: "call", op: "in", args: ["studyIds", ["s1", "s2"]], at: 13 },
      ],
    });
    expect(parseRql("published=true&revisionsAhead=ge=2")).to.deep.equal({
      kind: "call",
      op: "and",
      at: 0,
      args: [
        { kind: "call", op: "eq", args: ["published", true], at: 0 },
        { kind: "call", op: "ge", args: ["revisionsAhead", 2], at: 15 },
      ],
    });
    expect(parseRql("eq(id,'a,b(c)')").args).to.deep.equal(["id", "a,b(c)"]);
    expect(parseRql("eq(id,sant%C3%A9)").args).to.deep.equal(["id", "santé"]);
    expect(parseRql("eq(id,string:12)").args).to.deep.equal(["id", "12"]);
    expect(parseRql("match(santé publique)").args).to.deep.equal(["santé publique"]);
  });

  it("reports where a query stops making sense", () => {
    const cases: [string, number][] = [
      ["and(eq(a,b),like(x,heal*)", 25],
      ["eq(a,b))", 7],
      ["eq(a,b)&eq(c,d)|eq(e,f)", 15],
      ["eq(a,'open", 5],
      ["name", 4],
    ];
    for (const [q, position] of cases) {
      let error: unknown;
      try {
        parseRql(q);
      } catch (e) {
        error = e;
      }
      expect(error, q).to.be.instanceOf(RqlSyntaxError);
      expect((error as RqlSyntaxError).position, q).to.equal(position);
      expect((error as Error).message).to.contain(`position ${position}`);
    }
  });
});

describe("network search and listing", () => {
  let t: Awaited<ReturnType<typeof openTempCatalog>>;
  before(async () => {
    // A clock one second ahead at each reading, so that lastModifiedDate orders every write.
    let now = Date.parse("2026-01-01T00:00:00.000Z");
    t = await openTempCatalog({ now: () => new Date((now += 1000)) });
    const docs: NetworkInput[] = [
      {
        id: "health",
        name: [
          { lang: "en", value: "Health Network" },
          { lang: "fr", value: "Réseau Santé" },
        ],
        acronym: [{ lang: "en", value: "HN" }],
        description: [{ lang: "en", value: "<p>Cohorts on <b>ageing</b></p>" }],
        studyIds: ["s1", "s2"],
        model: { country: "CA", size: 10, tags: ["x", "y"], contact: { email: "a@b.c" } },
      },
      {
        id: "birth",
        name: [{ lang: "en", value: "Birth Cohorts" }],
        acronym: [
          { lang: "en", value: "BC" },
          { lang: "fr", value: "CN" },
        ],
        studyIds: ["s2"],
        model: { country: "FR", size: 3 },
      },
      { id: "zeta", name: [{ lang: "en", value: "Zeta Éléphant" }], acronym: [{ lang: "en", value: "AZ" }], networkIds: ["health"] },
    ];
    for (const d of docs) await t.catalog.create(d, "alice");
    await t.catalog.update("birth", docs[1]!, "alice");
    await t.catalog.publish("health", "alice");
    await t.catalog.publish("birth", "alice");
    await t.catalog.update("birth", docs[1]!, "alice");
    await t.catalog.setStatus("zeta", "UNDER_REVIEW");
  });
  after(async () => {
    await t.dispose();
  });

  const q = (query: string) => ids(t.catalog.list({ query }));

  it("supports each operator", () => {
    expect(q("eq(id,health)")).to.deep.equal(["health"]);
    expect(q("ne(id,health)")).to.deep.equal(["birth", "zeta"]);
    expect(q("in(studyIds,(s1,s9))")).to.deep.equal(["health"]);
    expect(q("out(studyIds,(s2))")).to.deep.equal(["zeta"]);
    expect(q("like(name.en,*cohort*)")).to.deep.equal(["birth"]);
    expect(q("like(name,*sante)")).to.deep.equal(["health"]);
    expect(q("exists(model.contact.email)")).to.deep.equal(["health"]);
    expect(q("exists(acronym.fr,false)")).to.deep.equal(["health", "zeta"]);
    expect(q("not(exists(model))")).to.deep.equal(["zeta"]);
    expect(q("or(eq(model.country,FR),eq(model.tags,y))")).to.deep.equal(["birth", "health"]);
    expect(q("and(eq(published,true),eq(revisionStatus,DRAFT))")).to.deep.equal(["birth", "health"]);
    expect(q("model.size=gt=5")).to.deep.equal(["health"]);
    expect(q("eq(networkIds,health)")).to.deep.equal(["zeta"]);
    expect(q("eq(published,false)")).to.deep.equal(["zeta"]);
  });

  it("matches full text without case or accents, by word prefix", () => {
    expect(q("match(heal*)")).to.deep.equal(["health"]);
    expect(q("match(HEAL)")).to.deep.equal(["health"]);
    expect(q("match(sante)")).to.deep.equal(["health"]);
    expect(q("match(SANTÉ)")).to.deep.equal(["health"]);
    expect(q("match(elephant)")).to.deep.equal(["zeta"]);
    expect(q("match(ageing)")).to.deep.equal(["health"], "words inside HTML descriptions");
    expect(q("match(p)")).to.deep.equal([], "tags are not words");
    expect(q("match(coh*)")).to.deep.equal(["birth", "health"]);
    expect(q("match(health cohorts)")).to.deep.equal(["health"], "every word must match");
    expect(q("match(h*th)")).to.deep.equal(["health"]);
    expect(q("match(name,cohorts)")).to.deep.equal(["birth"]);
    expect(q("and(match(coh*),not(eq(id,birth)))")).to.deep.equal(["health"], "prefix search with exclusion");
  });

  it("refuses queries that do not parse or make no sense as invalid", async () => {
    for (const bad of ["and(eq(id,a)", "eq(colour,red)", "frobnicate(id)", "eq(id)", "match()", "in(id,eq(a,b))"]) {
      const e = await rejection(() => t.catalog.list({ query: bad }));
      expect(e.kind, bad).to.equal("invalid");
      expect(e.message, bad).to.match(/position \d+/);
    }
  });

  it("filters by state, study and exclusions", () => {
    expect(ids(t.catalog.list({ filter: "ALL" }))).to.deep.equal(["birth", "health", "zeta"]);
    expect(ids(t.catalog.list({ filter: "PUBLISHED" }))).to.deep.equal(["birth", "health"]);
    expect(ids(t.catalog.list({ filter: "IN_EDITION" }))).to.deep.equal(["birth"]);
    expect(ids(t.catalog.list({ filter: "UNDER_REVIEW" }))).to.deep.equal(["zeta"]);
    expect(ids(t.catalog.list({ filter: "TO_DELETE" }))).to.deep.equal([]);
    expect(ids(t.catalog.list({ study: "s2" }))).to.deep.equal(["birth", "health"]);
    expect(ids(t.catalog.list({ exclude: ["birth,zeta"] }))).to.deep.equal(["health"]);
    expect(ids(t.catalog.list({ exclude: ["birth", "zeta"] }))).to.deep.equal(["health"]);
  });

  it("sorts, orders and pages, counting matches before paging", () => {
    expect(ids(t.catalog.list({ sort: "acronym.en" }))).to.deep.equal(["zeta", "birth", "health"]);
    expect(ids(t.catalog.list({ sort: "acronym.fr" }))).to.deep.equal(["birth", "health", "zeta"], "missing values last");
    expect(ids(t.catalog.list({ sort: "name.en", order: "DESC" }))).to.deep.equal(["zeta", "health", "birth"]);
    expect(ids(t.catalog.list({ sort: "lastModifiedDate", order: "desc" }))).to.deep.equal(["birth", "zeta", "health"]);
    expect(ids(t.catalog.list({ order: "Desc" }))).to.deep.equal(["zeta", "health", "birth"]);
    const page = t.catalog.list({ from: 1, limit: 1 });
    expect([ids(page), page.total]).to.deep.equal([["health"], 3]);
    expect(ids(t.catalog.list({ from: 5 }))).to.deep.equal([]);
    expect(ids(t.catalog.list({ limit: 0 }))).to.deep.equal([]);
  });

  it("refuses bad listing parameters", async () => {
    const bad = [{ limit: -1 }, { from: -1 }, { order: "up" }, { filter: "DRAFT" }, { filter: "published" }, { sort: "colour" }];
    for (const params of bad) expect((await rejection(() => t.catalog.list(params))).kind, JSON.stringify(params)).to.equal("invalid");
  });
});
