import { expect } from "chai";
import type * as grpcJs from "@grpc/grpc-js";
import { call, metadataFor, rest, serveWithClients, type RestAnswer } from "../support/clients.js";

/**
 * The NetworkService over real sockets: REST (status codes, bodies, headers of reference §2) and
 * gRPC through @grpc/grpc-js (status codes), for every endpoint, its success and its errors.
 */

const JSON_BODY = { "content-type": "application/json" };
const STAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ALL = { view: true, edit: true, delete: true, publish: true };
const STATE = "vendor.catalog.EntityStateDto.state";
const SUMMARY_STATE = "vendor.catalog.EntityStateDto.networkSummaryState";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Replaces every value under a timestamp-like key by "<ts>" after checking its shape. */
function stamped(value: Json, path = ""): Json {
  if (Array.isArray(value)) return value.map((v, i) => stamped(v, `${path}[${i}]`));
  if (value !== null && typeof value === "object") {
    const out: Record<string, Json> = {};
    for (const [k, v] of Object.entries(value)) {
      if (["created", "lastUpdate", "publicationDate", "date"].includes(k) && typeof v === "string") {
        expect(v, `${path}.${k}`).to.match(STAMP);
        out[k] = "<ts>";
      } else out[k] = stamped(v, `${path}.${k}`);
    }
    return out;
  }
  return value;
}

const GRPC = { OK: 0, INVALID_ARGUMENT: 3, NOT_FOUND: 5, ALREADY_EXISTS: 6, PERMISSION_DENIED: 7, UNAUTHENTICATED: 16 } as const;

describe("NetworkService over REST and gRPC", function () {
  this.timeout(60_000);
  const served = serveWithClients();

  function req(method: string, path: string, user?: string, body?: unknown): Promise<RestAnswer> {
    return rest(served.server.url, method, path, {
      ...(user ? { user } : {}),
      ...(body !== undefined ? { headers: JSON_BODY, body: typeof body === "string" ? body : JSON.stringify(body) } : {}),
    });
  }

  async function expectStatus(method: string, path: string, user: string | undefined, status: number, body?: unknown): Promise<RestAnswer> {
    const res = await req(method, path, user, body);
    expect(res.status, `${method} ${path} as ${user ?? "anonymous"}: ${res.text}`).to.equal(status);
    return res;
  }

  const net = (id: string, extra: Record<string, unknown> = {}) => ({ id, name: [{ lang: "en", value: `Net ${id}` }], ...extra });

  /** A fresh network per test, so that tests do not depend on each other's order. */
  let counter = 0;
  async function fresh(extra: Record<string, unknown> = {}): Promise<string> {
    const id = `api${++counter}`;
    await expectStatus("POST", "/ws/draft/networks", "cadmin", 201, net(id, extra));
    return id;
  }

  /** The gRPC status code of a call (0 on success). */
  function grpcCode(
    start: (md: grpcJs.Metadata, cb: (err: grpcJs.ServiceError | null) => void) => unknown,
    user?: string,
  ): Promise<number> {
    return new Promise((resolve) => start(metadataFor(user), (err) => resolve(err ? err.code : GRPC.OK)));
  }

  describe("REST successes", () => {
    it("creates: 201, Location, and the full network exactly as §2.1", async () => {
      const res = await expectStatus("POST", "/ws/draft/networks", "editor", 201, {
        name: [
          { lang: "fr", value: "Réseau Santé Été" },
          { lang: "en", value: "Health Network" },
          { lang: "de", value: "" },
        ],
        acronym: [{ lang: "en", value: "HN" }],
        description: [{ lang: "en", value: "<p>About</p>" }],
        content: ' {"country": "CA", "size": [1, 2]} ',
        studyIds: ["s1", "s2"],
        studySummaries: [{ id: "s1", n: 2 }],
        memberships: [{ role: "contact", person: "x" }],
        logo: {
          id: "l1",
          fileName: "logo.png",
          type: "png",
          lang: "en",
          size: 12,
          md5: "abc",
          timestamps: { created: "2026-01-02T03:04:05.678Z" },
        },
        // Server-managed fields are ignored on input.
        published: true,
        permissions: { view: false },
      });
      expect(res.headers.get("location")).to.equal(`${served.server.url}/ws/draft/network/hn`);
      expect(res.headers.get("content-type")).to.match(/^application\/json/);
      const perms = { view: true, edit: true, delete: false, publish: false };
      expect(stamped(res.json<Json>())).to.deep.equal({
        id: "hn",
        name: [
          { lang: "en", value: "Health Network" },
          { lang: "fr", value: "Réseau Santé Été" },
        ],
        acronym: [{ lang: "en", value: "HN" }],
        description: [{ lang: "en", value: "<p>About</p>" }],
        content: '{"country":"CA","size":[1,2]}',
        studyIds: ["s1", "s2"],
        studySummaries: [{ id: "s1", n: 2 }],
        memberships: [{ role: "contact", person: "x" }],
        logo: { id: "l1", fileName: "logo.png", type: "png", lang: "en", size: 12, md5: "abc", timestamps: { created: "<ts>" } },
        permissions: perms,
        published: false,
        timestamps: { created: "<ts>", lastUpdate: "<ts>" },
        [STATE]: { revisionsAhead: 1, revisionStatus: "DRAFT", permissions: perms },
      });
      // The id is derived from the acronym; a second one with the same acronym gets a suffix.
      const second = await expectStatus("POST", "/ws/draft/networks", "editor", 201, {
        name: [{ lang: "en", value: "Other" }],
        acronym: [{ lang: "en", value: "HN" }],
      });
      expect(second.json<{ id: string }>().id).to.equal("hn-1");
    });

    it("gets a published network and its list item exactly as §2.1", async () => {
      const id = await fresh({ acronym: [{ lang: "en", value: "G" }], studyIds: ["g1"], content: '{"a":1}' });
      await expectStatus("PUT", `/ws/draft/network/${id}/_publish`, "reviewer", 204);
      await expectStatus("PUT", `/ws/draft/network/${id}/model`, "editor", 204, { a: 2 });
      const full = (await expectStatus("GET", `/ws/draft/network/${id}`, "cadmin", 200)).json<Json>();
      const state = {
        publishedTag: "1",
        revisionsAhead: 1,
        revisionStatus: "DRAFT",
        publicationDate: "<ts>",
        publishedBy: "reviewer",
        publishedId: "1",
        permissions: ALL,
      };
      expect(stamped(full)).to.deep.equal({
        id,
        name: [{ lang: "en", value: `Net ${id}` }],
        acronym: [{ lang: "en", value: "G" }],
        content: '{"a":2}',
        studyIds: ["g1"],
        permissions: ALL,
        published: true,
        timestamps: { created: "<ts>", lastUpdate: "<ts>" },
        [STATE]: state,
      });
      const list = await expectStatus("GET", `/ws/draft/networks?query=${encodeURIComponent(`eq(id,${id})`)}`, "cadmin", 200);
      expect(list.headers.get("x-total-count")).to.equal("1");
      expect(stamped(list.json<Json>())).to.deep.equal([
        {
          id,
          timestamps: { created: "<ts>", lastUpdate: "<ts>" },
          name: [{ lang: "en", value: `Net ${id}` }],
          acronym: [{ lang: "en", value: "G" }],
          published: true,
          studyIds: ["g1"],
          permissions: ALL,
          [SUMMARY_STATE]: state,
        },
      ]);
    });

    it("answers every other endpoint with its status and body", async () => {
      const id = await fresh({ content: '{"x":1}' });
      expect((await expectStatus("GET", `/ws/draft/network/${id}/model`, "editor", 200)).json()).to.deep.equal({ x: 1 });
      const put = await expectStatus(
        "PUT",
        `/ws/draft/network/${id}?comment=renamed`,
        "editor",
        204,
        net(id, { name: [{ lang: "en", value: "Renamed" }] }),
      );
      expect(put.text).to.equal("");
      expect((await expectStatus("GET", `/ws/draft/network/${id}/model`, "editor", 200)).json()).to.deep.equal(
        {},
        "a full replacement without content",
      );
      await expectStatus("PUT", `/ws/draft/network/${id}/model`, "editor", 204, { y: [1] });
      await expectStatus("PUT", `/ws/draft/network/${id}/_index`, "cadmin", 204);
      // The contract: "200: the rebuild task is scheduled"; an empty message has no body and no type.
      const rebuilt = await expectStatus("PUT", "/ws/draft/networks/_index", "cadmin", 200);
      expect([rebuilt.text, rebuilt.headers.get("content-type")]).to.deep.equal(["", null]);
      await expectStatus("PUT", `/ws/draft/network/${id}/_status?value=UNDER_REVIEW`, "reviewer", 204);
      const commits = (await expectStatus("GET", `/ws/draft/network/${id}/commits`, "editor", 200)).json<Json>();
      expect(stamped(commits)).to.deep.equal([
        { commitId: "3", author: "editor", date: "<ts>", isHead: true, isPublished: false },
        { commitId: "2", author: "editor", date: "<ts>", comment: "renamed", isHead: false, isPublished: false },
        { commitId: "1", author: "cadmin", date: "<ts>", isHead: false, isPublished: false },
      ]);
      const view = (await expectStatus("GET", `/ws/draft/network/${id}/commit/1/view`, "editor", 200)).json<{
        name: { value: string }[];
        content: string;
      }>();
      expect([view.name[0]!.value, view.content]).to.deep.equal([`Net ${id}`, '{"x":1}']);
      expect((await expectStatus("GET", `/ws/draft/network/${id}/_diff?left=2&right=3`, "editor", 200)).json()).to.deep.equal({
        model: [{}, { y: [1] }],
      });
      await expectStatus("PUT", `/ws/draft/network/${id}/commit/1/restore`, "editor", 204);
      expect((await expectStatus("GET", `/ws/draft/network/${id}/model`, "editor", 200)).json()).to.deep.equal({ x: 1 });
      await expectStatus("PUT", `/ws/draft/network/${id}/_publish`, "cadmin", 204);
      await expectStatus("DELETE", `/ws/draft/network/${id}/_publish`, "cadmin", 204);
      const state = (await expectStatus("GET", `/ws/draft/network/${id}`, "cadmin", 200)).json<Record<string, Json>>();
      expect([state.published, (state[STATE] as Record<string, Json>).publishedTag]).to.deep.equal([false, undefined]);
      await expectStatus("DELETE", `/ws/draft/network/${id}`, "reviewer", 204);
      await expectStatus("GET", `/ws/draft/network/${id}`, "cadmin", 404);
    });
  });

  describe("REST errors", () => {
    it("400 names the field at fault", async () => {
      const id = await fresh();
      const cases: [string, string, unknown, RegExp][] = [
        ["POST", "/ws/draft/networks", { id: "noname" }, /name is required/],
        ["POST", "/ws/draft/networks", { name: [{ lang: "en", value: "" }] }, /name is required/],
        ["POST", "/ws/draft/networks", { name: [{ lang: "en", value: "C" }], content: "[1]" }, /content must be a JSON object/],
        ["POST", "/ws/draft/networks", { name: [{ lang: "en", value: "C" }], content: "{" }, /content is not valid JSON/],
        ["PUT", `/ws/draft/network/${id}`, net("other"), /Body id other differs from path id/],
        ["PUT", `/ws/draft/network/${id}`, { id }, /name is required/],
        ["PUT", `/ws/draft/network/${id}/_status?value=PUBLISHED`, undefined, /value must be one of/],
        ["PUT", `/ws/draft/network/${id}/_share_key?expire=tomorrow`, undefined, /expire must be/],
        ["PUT", `/ws/draft/network/${id}/_share_key?expire=2000-01-01`, undefined, /expire must be a day that has not begun/],
        ["GET", `/ws/draft/network/${id}/_diff?right=1`, undefined, /left is required/],
        ["GET", "/ws/draft/networks?limit=-1", undefined, /limit must not be negative/],
        ["GET", "/ws/draft/networks?order=up", undefined, /order must be asc or desc/],
        ["GET", "/ws/draft/networks?filter=DRAFT", undefined, /filter must be one of/],
        ["GET", "/ws/draft/networks?sort=colour", undefined, /sort must be/],
        ["GET", `/ws/draft/networks?query=${encodeURIComponent("eq(colour,red)")}`, undefined, /Unknown field "colour"/],
      ];
      for (const [method, path, body, message] of cases) {
        const user = method === "PUT" && path.includes("_status") ? "reviewer" : "cadmin";
        const res = await expectStatus(method, path, user, 400, body);
        const error = res.json<{ status: string; message: string }>();
        expect(error.status, path).to.equal("400");
        expect(error.message, `${method} ${path}`).to.match(message);
      }
    });

    it("404 for a missing network on every endpoint that names one", async () => {
      const paths: [string, string, unknown?][] = [
        ["GET", "/ws/draft/network/missing"],
        ["PUT", "/ws/draft/network/missing", net("missing")],
        ["DELETE", "/ws/draft/network/missing"],
        ["GET", "/ws/draft/network/missing/model"],
        ["PUT", "/ws/draft/network/missing/model", { a: 1 }],
        ["PUT", "/ws/draft/network/missing/_index"],
        ["PUT", "/ws/draft/network/missing/_status?value=DRAFT"],
        ["PUT", "/ws/draft/network/missing/_publish"],
        ["DELETE", "/ws/draft/network/missing/_publish"],
        ["GET", "/ws/draft/network/missing/commits"],
        ["GET", "/ws/draft/network/missing/commit/1/view"],
        ["PUT", "/ws/draft/network/missing/commit/1/restore"],
        ["GET", "/ws/draft/network/missing/_diff?left=1&right=2"],
        ["PUT", "/ws/draft/network/missing/_share_key?expire=2999-01-01"],
      ];
      for (const [method, path, body] of paths) {
        const res = await expectStatus(method, path, "cadmin", 404, body);
        expect(res.json<{ message: string }>().message, path).to.contain("missing");
      }
      const id = await fresh();
      await expectStatus("GET", `/ws/draft/network/${id}/commit/9/view`, "cadmin", 404);
    });

    it("409 for an existing id and for deleting an included network, with the includers", async () => {
      const id = await fresh();
      const dup = await expectStatus("POST", "/ws/draft/networks", "cadmin", 409, net(id));
      expect(dup.json<{ message: string }>().message).to.contain(id);
      const a = await fresh({ networkIds: [id] });
      const b = await fresh({ networkIds: ["unrelated", id] });
      const refused = await expectStatus("DELETE", `/ws/draft/network/${id}`, "cadmin", 409);
      expect(refused.json()).to.deep.equal({ network: [a, b] });
      await expectStatus("GET", `/ws/draft/network/${id}`, "cadmin", 200);
      // Once nobody includes it, it goes.
      await expectStatus("DELETE", `/ws/draft/network/${a}`, "cadmin", 204);
      await expectStatus("PUT", `/ws/draft/network/${b}`, "cadmin", 204, net(b));
      await expectStatus("DELETE", `/ws/draft/network/${id}`, "cadmin", 204);
    });

    it("403 per role (401 for the index rebuilds, as the contract says) and 401 without credentials, before existence", async () => {
      const id = await fresh();
      const matrix: [string, string, unknown, string[]][] = [
        ["POST", "/ws/draft/networks", net("denied"), ["nobody", "admin"]],
        ["GET", `/ws/draft/network/${id}`, undefined, ["nobody", "admin"]],
        ["PUT", `/ws/draft/network/${id}`, net(id), ["nobody", "admin"]],
        ["GET", `/ws/draft/network/${id}/model`, undefined, ["nobody"]],
        ["PUT", `/ws/draft/network/${id}/model`, {}, ["nobody"]],
        ["DELETE", `/ws/draft/network/${id}`, undefined, ["editor", "nobody"]],
        ["PUT", `/ws/draft/network/${id}/_status?value=DRAFT`, undefined, ["editor", "nobody"]],
        ["PUT", `/ws/draft/network/${id}/_publish`, undefined, ["editor", "nobody"]],
        ["DELETE", `/ws/draft/network/${id}/_publish`, undefined, ["editor", "nobody"]],
        ["GET", `/ws/draft/network/${id}/commits`, undefined, ["nobody"]],
        ["PUT", `/ws/draft/network/${id}/_share_key?expire=2999-01-01`, undefined, ["nobody"]],
        // A missing id is not revealed to those who may not act on it.
        ["DELETE", "/ws/draft/network/missing", undefined, ["editor"]],
        ["GET", "/ws/draft/network/missing", undefined, ["nobody"]],
      ];
      for (const [method, path, body, denied] of matrix) {
        for (const user of denied) await expectStatus(method, path, user, 403, body);
        const anonymous = await expectStatus(method, path, undefined, 401, body);
        expect(anonymous.headers.get("www-authenticate")).to.match(/^Basic realm=/);
      }
      // draft-networks §4 and §7: "401 … or no permission to rebuild indices", challenged like a missing login.
      const rebuilds: [string, string][] = [
        [`/ws/draft/network/${id}/_index`, "IndexNetwork"],
        ["/ws/draft/network/missing/_index", "IndexNetwork"],
        ["/ws/draft/networks/_index", "RebuildIndex"],
      ];
      for (const [path, rpc] of rebuilds) {
        for (const user of ["reviewer", "editor", "nobody", "admin"]) {
          const refused = await expectStatus("PUT", path, user, 401);
          expect(refused.headers.get("www-authenticate"), `${path} as ${user}`).to.match(/^Basic realm=/);
          expect(refused.json()).to.deep.include({
            key: "unauthenticated",
            message: `${rpc} requires one of the roles: catalog-administrator`,
          });
        }
        await expectStatus("PUT", path, undefined, 401);
      }
      await expectStatus("GET", "/ws/draft/networks", undefined, 401);
      // Without a catalogue role the list is empty rather than refused.
      const empty = await expectStatus("GET", "/ws/draft/networks", "nobody", 200);
      expect([empty.json(), empty.headers.get("x-total-count")]).to.deep.equal([[], "0"]);
      await expectStatus("GET", `/ws/draft/network/${id}`, "cadmin", 200);
    });
  });

  it("share keys: text/plain key, grants nobody and anonymous callers this network only, never without a key", async () => {
    const id = await fresh();
    const other = await fresh();
    const res = await expectStatus("PUT", `/ws/draft/network/${id}/_share_key?expire=2999-12-31`, "editor", 200);
    expect(res.headers.get("content-type")).to.match(/^text\/plain/);
    const key = res.text;
    expect(key).to.match(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    const shared = await expectStatus("GET", `/ws/draft/network/${id}?key=${encodeURIComponent(key)}`, "nobody", 200);
    const body = shared.json<{ id: string; permissions: Json }>();
    expect([body.id, body.permissions]).to.deep.equal([id, { view: true, edit: false, delete: false, publish: false }]);
    await expectStatus("GET", `/ws/draft/network/${other}?key=${encodeURIComponent(key)}`, "nobody", 403);
    await expectStatus("GET", `/ws/draft/network/${id}`, "nobody", 403);
    await expectStatus("GET", `/ws/draft/network/${id}?key=${encodeURIComponent(`${key.slice(0, -2)}xx`)}`, "nobody", 403);
    // The key opens the document, nothing else.
    await expectStatus("GET", `/ws/draft/network/${id}/model?key=${encodeURIComponent(key)}`, "nobody", 403);
    // The key is a credential of its own (reference-behaviour §3).
    await expectStatus("GET", `/ws/draft/network/${id}?key=${encodeURIComponent(key)}`, undefined, 200);
    await expectStatus("GET", `/ws/draft/network/${id}`, undefined, 401);
  });

  describe("listing over REST", () => {
    let tag: string;
    let ids: string[];
    before(async () => {
      tag = `lst${Date.now()}`;
      // Names chosen so that name.en order differs from id order.
      const specs: [string, string, string[], string][] = [
        ["a", "Zulu Santé", ["x1"], '{"country":"FR","size":3}'],
        ["b", "Alpha Health", ["x1", "x2"], '{"country":"CA","size":10}'],
        ["c", "Mike Healing", ["x2"], '{"country":"FR"}'],
        ["d", "Echo", [], "{}"],
      ];
      ids = [];
      for (const [suffix, name, studies, content] of specs) {
        const id = `${tag}-${suffix}`;
        ids.push(id);
        await expectStatus("POST", "/ws/draft/networks", "cadmin", 201, {
          id,
          name: [{ lang: "en", value: `${name} ${tag}` }],
          acronym: [{ lang: "en", value: suffix.toUpperCase() }],
          studyIds: studies,
          content,
        });
      }
      await expectStatus("PUT", `/ws/draft/network/${ids[0]}/_publish`, "cadmin", 204);
      await expectStatus("PUT", `/ws/draft/network/${ids[1]}/_publish`, "cadmin", 204);
      await expectStatus("PUT", `/ws/draft/network/${ids[1]}/model`, "cadmin", 204, { country: "CA", size: 11 });
      await expectStatus("PUT", `/ws/draft/network/${ids[2]}/_status?value=UNDER_REVIEW`, "cadmin", 204);
      await expectStatus("PUT", `/ws/draft/network/${ids[3]}/_status?value=DELETED`, "cadmin", 204);
    });

    /** Ids and X-Total-Count of a list restricted to this test's networks (by its tag word). */
    async function list(params: string, user = "cadmin"): Promise<[string[], string | null]> {
      const sep = params ? "&" : "";
      const q = params.includes("query=")
        ? params.replace(
            /query=([^&]*)/,
            (_, inner: string) => `query=${encodeURIComponent(`and(match(${tag}),${decodeURIComponent(inner)})`)}`,
          )
        : `${params}${sep}query=${encodeURIComponent(`match(${tag})`)}`;
      const res = await expectStatus("GET", `/ws/draft/networks?${q}`, user, 200);
      return [res.json<{ id: string }[]>().map((n) => n.id), res.headers.get("x-total-count")];
    }
    const short = (r: [string[], string | null]) => [r[0].map((id) => id.slice(-1)), r[1]];

    it("filters by state and study, excludes, and counts before paging", async () => {
      expect(short(await list(""))).to.deep.equal([["a", "b", "c", "d"], "4"]);
      expect(short(await list("filter=ALL"))).to.deep.equal([["a", "b", "c", "d"], "4"]);
      expect(short(await list("filter=PUBLISHED"))).to.deep.equal([["a", "b"], "2"]);
      expect(short(await list("filter=IN_EDITION"))).to.deep.equal([["b"], "1"]);
      expect(short(await list("filter=UNDER_REVIEW"))).to.deep.equal([["c"], "1"]);
      expect(short(await list("filter=TO_DELETE"))).to.deep.equal([["d"], "1"]);
      expect(short(await list("study=x2"))).to.deep.equal([["b", "c"], "2"]);
      expect(short(await list(`study=x1&filter=PUBLISHED&exclude=${ids[0]}`))).to.deep.equal([["b"], "1"]);
      expect(short(await list(`exclude=${ids[0]},${ids[2]}`))).to.deep.equal([["b", "d"], "2"]);
      expect(short(await list(`exclude=${ids[0]}&exclude=${ids[3]}`))).to.deep.equal([["b", "c"], "2"]);
      expect(short(await list("from=1&limit=2"))).to.deep.equal([["b", "c"], "4"]);
      expect(short(await list("from=3&limit=5"))).to.deep.equal([["d"], "4"]);
      expect(short(await list("limit=0"))).to.deep.equal([[], "4"]);
      expect(short(await list("", "editor"))).to.deep.equal([["a", "b", "c", "d"], "4"]);
    });

    it("sorts by id, name, acronym and last modification, in either order", async () => {
      expect(short(await list("order=desc"))).to.deep.equal([["d", "c", "b", "a"], "4"]);
      expect(short(await list("sort=name.en"))).to.deep.equal([["b", "d", "c", "a"], "4"]);
      expect(short(await list("sort=name.en&order=DESC&limit=2"))).to.deep.equal([["a", "c"], "4"]);
      expect(short(await list("sort=acronym.en&order=desc"))).to.deep.equal([["d", "c", "b", "a"], "4"]);
      // Missing values last in both orders.
      expect(short(await list("sort=name.fr&order=desc"))).to.deep.equal([["a", "b", "c", "d"], "4"]);
      expect(short(await list("sort=lastModifiedDate&order=desc&limit=1"))).to.deep.equal([["b"], "4"]);
    });

    it("runs RQL from the url-encoded query parameter", async () => {
      expect(short(await list(`query=${encodeURIComponent("eq(model.country,FR)")}`))).to.deep.equal([["a", "c"], "2"]);
      expect(short(await list(`query=${encodeURIComponent("match(sante)")}`))).to.deep.equal([["a"], "1"]);
      expect(short(await list(`query=${encodeURIComponent("match(heal*)")}`))).to.deep.equal([["b", "c"], "2"]);
      expect(short(await list(`query=${encodeURIComponent(`and(match(heal*),not(eq(id,string:${ids[1]})))`)}`))).to.deep.equal([
        ["c"],
        "1",
      ]);
      expect(short(await list(`query=${encodeURIComponent("like(name.en,alpha*)")}`))).to.deep.equal([["b"], "1"]);
      expect(short(await list(`query=${encodeURIComponent("in(studyIds,(x1,nope))")}`))).to.deep.equal([["a", "b"], "2"]);
      expect(short(await list(`query=${encodeURIComponent("gt(model.size,5)")}`))).to.deep.equal([["b"], "1"]);
      expect(short(await list(`query=${encodeURIComponent("exists(model.size,false)")}&sort=name.en`))).to.deep.equal([["d", "c"], "2"]);
      expect(short(await list(`query=${encodeURIComponent("eq(published,true)")}&filter=IN_EDITION`))).to.deep.equal([["b"], "1"]);
    });

    it("answers 400 with the position of a syntax error", async () => {
      for (const [query, position] of [
        ["and(eq(id,a)", 12],
        ["eq(id,a))", 8],
        ["eq(a,b)&eq(c,d)|eq(e,f)", 15],
        ["name", 4],
      ] as const) {
        const res = await expectStatus("GET", `/ws/draft/networks?query=${encodeURIComponent(query)}`, "cadmin", 400);
        expect(res.json<{ message: string }>().message, query).to.contain(`at position ${position}`);
      }
    });
  });

  describe("gRPC (grpc-js)", () => {
    const n = (id: string) => ({
      id,
      name: [{ lang: "en", value: `G ${id}` }],
      acronym: [],
      description: [],
      studyIds: ["gs"],
      studySummaries: [],
      memberships: [],
      networkIds: [],
    });

    it("answers every RPC with OK and its content", async () => {
      const c = served.clients.networks;
      const md = metadataFor("cadmin");
      const id = `grpc${++counter}`;
      const created = await call<{ network?: { id?: string; state?: { revisionsAhead?: number } } }>((cb) =>
        c.createNetwork({ network: n(id) }, md, cb),
      );
      expect([created.network?.id, created.network?.state?.revisionsAhead]).to.deep.equal([id, 1]);
      const got = await call<{ network?: { name: { value?: string }[]; permissions?: object } }>((cb) => c.getNetwork({ id }, md, cb));
      expect([got.network?.name[0]?.value, got.network?.permissions]).to.deep.equal([`G ${id}`, ALL]);
      await call((cb) => c.updateNetwork({ id, network: { ...n(id), content: '{"k":1}' }, comment: "c" }, md, cb));
      const model = await call<{ model?: object }>((cb) => c.getModel({ id }, md, cb));
      expect(model.model).to.deep.equal({ k: 1 });
      await call((cb) => c.updateModel({ id, model: { k: 2 } }, md, cb));
      await call((cb) => c.indexNetwork({ id }, md, cb));
      await call((cb) => c.rebuildIndex({}, md, cb));
      await call((cb) => c.setStatus({ id, value: "UNDER_REVIEW" }, md, cb));
      await call((cb) => c.publish({ id }, md, cb));
      const listed = await call<{ networks: { id?: string }[]; total?: number }>((cb) =>
        c.listNetworks({ query: `eq(id,${id})`, filter: "PUBLISHED", exclude: [] }, md, cb),
      );
      expect([listed.networks.map((x) => x.id), listed.total]).to.deep.equal([[id], 1]);
      const revisions = await call<{ revisions: { commitId?: string }[] }>((cb) => c.listRevisions({ id }, md, cb));
      expect(revisions.revisions.map((r) => r.commitId)).to.deep.equal(["3", "2", "1"]);
      const view = await call<{ network?: { content?: string } }>((cb) => c.getRevision({ id, commitId: "2" }, md, cb));
      expect(view.network?.content).to.equal('{"k":1}');
      const diff = await call<{ diff?: object }>((cb) => c.diffRevisions({ id, left: "2", right: "3" }, md, cb));
      expect(diff.diff).to.deep.equal({ model: [{ k: 1 }, { k: 2 }] });
      await call((cb) => c.restoreRevision({ id, commitId: "1" }, md, cb));
      const key = await call<{ key?: { contentType?: string; data?: Uint8Array } }>((cb) =>
        c.createShareKey({ id, expire: "2999-01-01" }, md, cb),
      );
      expect(key.key?.contentType).to.equal("text/plain");
      const shared = await call<{ network?: { id?: string } }>((cb) =>
        c.getNetwork({ id, key: Buffer.from(key.key!.data!).toString() }, metadataFor("nobody"), cb),
      );
      expect(shared.network?.id).to.equal(id);
      await call((cb) => c.unpublish({ id }, md, cb));
      await call((cb) => c.deleteNetwork({ id }, md, cb));
      expect(await grpcCode((m, cb) => c.getNetwork({ id }, m, cb), "cadmin")).to.equal(GRPC.NOT_FOUND);
    });

    it("maps errors to status codes: invalid, missing, existing, denied, unauthenticated", async () => {
      const c = served.clients.networks;
      const id = `grpc${++counter}`;
      const a = `grpc${++counter}`;
      expect(await grpcCode((m, cb) => c.createNetwork({ network: n(id) }, m, cb), "editor")).to.equal(GRPC.OK);
      expect(await grpcCode((m, cb) => c.createNetwork({ network: { ...n(a), networkIds: [id] } }, m, cb), "editor")).to.equal(GRPC.OK);
      const cases: [string, (m: grpcJs.Metadata, cb: (err: grpcJs.ServiceError | null) => void) => unknown, string | undefined, number][] =
        [
          ["create without name", (m, cb) => c.createNetwork({ network: { ...n("x"), name: [] } }, m, cb), "cadmin", GRPC.INVALID_ARGUMENT],
          ["bad status value", (m, cb) => c.setStatus({ id, value: "NOPE" }, m, cb), "reviewer", GRPC.INVALID_ARGUMENT],
          ["bad query", (m, cb) => c.listNetworks({ query: "and(", exclude: [] }, m, cb), "cadmin", GRPC.INVALID_ARGUMENT],
          ["negative limit", (m, cb) => c.listNetworks({ limit: -1, exclude: [] }, m, cb), "cadmin", GRPC.INVALID_ARGUMENT],
          ["get missing", (m, cb) => c.getNetwork({ id: "missing" }, m, cb), "cadmin", GRPC.NOT_FOUND],
          ["update missing", (m, cb) => c.updateNetwork({ id: "missing", network: n("missing") }, m, cb), "editor", GRPC.NOT_FOUND],
          ["publish missing", (m, cb) => c.publish({ id: "missing" }, m, cb), "reviewer", GRPC.NOT_FOUND],
          ["create existing", (m, cb) => c.createNetwork({ network: n(id) }, m, cb), "cadmin", GRPC.ALREADY_EXISTS],
          ["delete included", (m, cb) => c.deleteNetwork({ id }, m, cb), "cadmin", GRPC.ALREADY_EXISTS],
          ["editor deletes", (m, cb) => c.deleteNetwork({ id }, m, cb), "editor", GRPC.PERMISSION_DENIED],
          ["editor publishes", (m, cb) => c.publish({ id }, m, cb), "editor", GRPC.PERMISSION_DENIED],
          ["reviewer rebuilds", (m, cb) => c.rebuildIndex({}, m, cb), "reviewer", GRPC.UNAUTHENTICATED],
          ["reviewer indexes", (m, cb) => c.indexNetwork({ id }, m, cb), "reviewer", GRPC.UNAUTHENTICATED],
          ["nobody gets", (m, cb) => c.getNetwork({ id }, m, cb), "nobody", GRPC.PERMISSION_DENIED],
          ["R admin creates", (m, cb) => c.createNetwork({ network: n("y") }, m, cb), "admin", GRPC.PERMISSION_DENIED],
          ["anonymous lists", (m, cb) => c.listNetworks({ exclude: [] }, m, cb), undefined, GRPC.UNAUTHENTICATED],
          ["anonymous gets", (m, cb) => c.getNetwork({ id }, m, cb), undefined, GRPC.UNAUTHENTICATED],
          ["anonymous deletes", (m, cb) => c.deleteNetwork({ id }, m, cb), undefined, GRPC.UNAUTHENTICATED],
        ];
      for (const [label, start, user, code] of cases) expect(await grpcCode(start, user), label).to.equal(code);
      const nobodyList = await call<{ networks: unknown[]; total?: number }>((cb) =>
        c.listNetworks({ exclude: [] }, metadataFor("nobody"), cb),
      );
      expect([nobodyList.networks, nobodyList.total ?? 0]).to.deep.equal([[], 0]);
    });
  });
});
