import { expect } from "chai";
import type * as grpcJs from "@grpc/grpc-js";
import { call, metadataFor, rest, serveWithClients, type RestAnswer } from "../support/clients.js";

/**
 * Inputs built to hurt, over real sockets: each one used to stall the server, answer 500 (or a
 * broken gRPC stream), or be stored in a form that could not be read back. Each must now answer a
 * 4xx (gRPC INVALID_ARGUMENT / NOT_FOUND) whose message says what was wrong, and leave the catalogue
 * readable.
 */

const JSON_BODY = { "content-type": "application/json" };
const GRPC = { OK: 0, INVALID_ARGUMENT: 3, NOT_FOUND: 5 } as const;

/** `{"a":{"a":…{"a":1}…}}` with `levels` objects. */
function nestedObjects(levels: number): Record<string, unknown> {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value as Record<string, unknown>;
}

/** `{"k":[[…[]…]]}` as text, too deep for JSON.stringify of a built value to be the test's problem. */
function nestedArraysText(levels: number): string {
  return `{"k":${"[".repeat(levels - 1)}${"]".repeat(levels - 1)}}`;
}

describe("catalogue inputs built to hurt", function () {
  this.timeout(60_000);
  const served = serveWithClients();

  function req(method: string, path: string, body?: unknown): Promise<RestAnswer> {
    return rest(served.server.url, method, path, {
      user: "cadmin",
      ...(body !== undefined ? { headers: JSON_BODY, body: typeof body === "string" ? body : JSON.stringify(body) } : {}),
    });
  }

  async function expectStatus(method: string, path: string, status: number, body?: unknown): Promise<RestAnswer> {
    const res = await req(method, path, body);
    expect(res.status, `${method} ${path.slice(0, 100)}: ${res.text.slice(0, 300)}`).to.equal(status);
    return res;
  }

  /** A 400 whose message matches. */
  async function expectRefused(method: string, path: string, message: RegExp, body?: unknown): Promise<void> {
    const res = await expectStatus(method, path, 400, body);
    expect(res.json<{ message: string }>().message).to.match(message);
  }

  const list = (query: string) => `/ws/draft/networks?query=${encodeURIComponent(query)}`;

  let counter = 0;
  async function fresh(extra: Record<string, unknown> = {}): Promise<string> {
    const id = `hostile${++counter}`;
    await expectStatus("POST", "/ws/draft/networks", 201, { id, name: [{ lang: "en", value: `Net ${id}` }], ...extra });
    return id;
  }

  /**
   * The gRPC status code and message of a call (code 0 on success). grpc-js decodes the message with
   * decodeURI, which leaves the escapes of reserved characters such as ":" and ";".
   */
  function grpcAnswer(
    start: (md: grpcJs.Metadata, cb: (err: grpcJs.ServiceError | null) => void) => unknown,
  ): Promise<{ code: number; details: string }> {
    return new Promise((resolve) =>
      start(metadataFor("cadmin"), (err) =>
        resolve(err ? { code: err.code, details: decodeURIComponent(err.details) } : { code: GRPC.OK, details: "" }),
      ),
    );
  }

  const grpcNetwork = (id: string, extra: Record<string, unknown> = {}) => ({
    id,
    name: [{ lang: "en", value: `G ${id}` }],
    acronym: [],
    description: [],
    studyIds: [],
    studySummaries: [],
    memberships: [],
    networkIds: [],
    ...extra,
  });

  describe("wildcards", () => {
    it("answers a backtracking like pattern right and at once", async function () {
      // The regular expression this pattern used to become took 40 s on the first name; the
      // timeout only tells an answer from a stall.
      this.timeout(10_000);
      const tag = `redos${Date.now()}`;
      await expectStatus("POST", "/ws/draft/networks", 201, { id: `${tag}-miss`, name: [{ lang: "en", value: "a".repeat(40) }] });
      await expectStatus("POST", "/ws/draft/networks", 201, { id: `${tag}-hit`, name: [{ lang: "en", value: `${"a".repeat(12)}b` }] });
      const res = await expectStatus("GET", list(`and(like(id,${tag}*),like(name.en,${"*a".repeat(10)}*b))`), 200);
      expect(res.json<{ id: string }[]>().map((n) => n.id)).to.deep.equal([`${tag}-hit`]);
    });

    it("refuses a like pattern or a match text longer than 256 characters", async () => {
      await expectRefused(
        "GET",
        list(`like(name.en,${"x".repeat(257)})`),
        /Pattern is 257 characters long; at most 256.*like at position 0/,
      );
      await expectRefused("GET", list(`match(${"x".repeat(300)})`), /Pattern is 300 characters long; at most 256/);
      await expectStatus("GET", list(`like(name.en,${"*x".repeat(128)})`), 200);
    });
  });

  describe("RQL", () => {
    it("refuses queries nested 5,000 deep", async () => {
      // Cut at the length limit, before any parsing.
      await expectRefused("GET", list(`${"(".repeat(5000)}eq(id,a)${")".repeat(5000)}`), /query is 10008 characters long; at most 4096/);
      const deep = await grpcAnswer((m, cb) =>
        served.clients.networks.listNetworks({ query: `${"and(".repeat(5000)}eq(id,a)${")".repeat(5000)}`, exclude: [] }, m, cb),
      );
      expect(deep.code, deep.details).to.equal(GRPC.INVALID_ARGUMENT);
      expect(deep.details).to.match(/query is 25008 characters long; at most 4096/);
    });

    it("refuses queries nested deeper than 32 levels, at the position of the first parenthesis too many", async () => {
      await expectRefused(
        "GET",
        list(`${"not(".repeat(40)}eq(id,a)${")".repeat(40)}`),
        /Parentheses nested deeper than 32 levels at position 131/,
      );
      await expectRefused(
        "GET",
        list(`in(id,${"(".repeat(40)}${")".repeat(40)})`),
        /Parentheses nested deeper than 32 levels at position 37/,
      );
      await expectStatus("GET", list(`${"not(".repeat(31)}eq(id,a)${")".repeat(31)}`), 200);
      const deep = await grpcAnswer((m, cb) =>
        served.clients.networks.listNetworks({ query: `${"and(".repeat(40)}eq(id,a)${")".repeat(40)}`, exclude: [] }, m, cb),
      );
      expect(deep.code, deep.details).to.equal(GRPC.INVALID_ARGUMENT);
      expect(deep.details).to.match(/Parentheses nested deeper than 32 levels at position 131/);
    });

    it("refuses queries longer than 4096 characters", async () => {
      const long = `or(${"eq(id,a),".repeat(500)}eq(id,b))`;
      await expectRefused("GET", list(long), new RegExp(`query is ${long.length} characters long; at most 4096`));
      const stars = `like(name.en,${"*".repeat(100_000)})`;
      const answer = await grpcAnswer((m, cb) => served.clients.networks.listNetworks({ query: stars, exclude: [] }, m, cb));
      expect(answer.code, answer.details).to.equal(GRPC.INVALID_ARGUMENT);
      expect(answer.details).to.match(new RegExp(`query is ${stars.length} characters long; at most 4096`));
    });
  });

  describe("document depth and size", () => {
    it("refuses content nested 5,000 deep over REST and gRPC", async () => {
      const body = { name: [{ lang: "en", value: "Deep" }], content: nestedArraysText(5000) };
      await expectRefused("POST", "/ws/draft/networks", /content nests deeper than 30 levels/, body);
      const grpc = await grpcAnswer((m, cb) =>
        served.clients.networks.createNetwork({ network: grpcNetwork("deep5000", { content: nestedArraysText(5000) }) }, m, cb),
      );
      expect(grpc.code, grpc.details).to.equal(GRPC.INVALID_ARGUMENT);
      expect(grpc.details).to.match(/content nests deeper than 30 levels/);
    });

    it("refuses content 3,000 deep, which used to be stored and then broke every read of the model", async () => {
      const id = await fresh({ content: '{"kept":true}' });
      await expectRefused("PUT", `/ws/draft/network/${id}`, /content nests deeper than 30 levels/, {
        id,
        name: [{ lang: "en", value: "x" }],
        content: nestedArraysText(3000),
      });
      const grpc = await grpcAnswer((m, cb) =>
        served.clients.networks.updateNetwork({ id, network: grpcNetwork(id, { content: nestedArraysText(3000) }) }, m, cb),
      );
      expect(grpc.code, grpc.details).to.equal(GRPC.INVALID_ARGUMENT);
      expect((await expectStatus("GET", `/ws/draft/network/${id}/model`, 200)).json()).to.deep.equal({ kept: true });
      const model = await call<{ model?: object }>((cb) => served.clients.networks.getModel({ id }, metadataFor("cadmin"), cb));
      expect(model.model).to.deep.equal({ kept: true });
    });

    it("refuses a model, study summary or membership 31 levels deep, which gRPC served.clients cannot decode", async () => {
      const id = await fresh();
      await expectRefused("PUT", `/ws/draft/network/${id}/model`, /content nests deeper than 30 levels/, nestedObjects(31));
      const model = await grpcAnswer((m, cb) => served.clients.networks.updateModel({ id, model: nestedObjects(31) }, m, cb));
      expect(model.code, model.details).to.equal(GRPC.INVALID_ARGUMENT);
      const base = { name: [{ lang: "en", value: "x" }] };
      await expectRefused("POST", "/ws/draft/networks", /studySummaries nests deeper than 30 levels/, {
        ...base,
        studySummaries: [{}, nestedObjects(31)],
      });
      await expectRefused("POST", "/ws/draft/networks", /memberships nests deeper than 30 levels/, {
        ...base,
        memberships: [nestedObjects(31)],
      });
      // Within the limit, nothing changes.
      await expectStatus("PUT", `/ws/draft/network/${id}/model`, 204, nestedObjects(30));
    });

    it("keeps a document at the depth limit readable by grpc-js through every read, diffs included", async () => {
      const md = metadataFor("cadmin");
      const c = served.clients.networks;
      const id = await fresh();
      const deep = nestedObjects(30);
      await call((cb) =>
        c.updateNetwork(
          { id, network: grpcNetwork(id, { content: JSON.stringify(deep), studySummaries: [deep], memberships: [deep] }) },
          md,
          cb,
        ),
      );
      const model = await call<{ model?: object }>((cb) => c.getModel({ id }, md, cb));
      expect(model.model).to.deep.equal(deep);
      const got = await call<{ network?: { studySummaries: object[]; memberships: object[] } }>((cb) => c.getNetwork({ id }, md, cb));
      expect([got.network?.studySummaries, got.network?.memberships]).to.deep.equal([[deep], [deep]]);
      const revision = await call<{ network?: { studySummaries: object[] } }>((cb) => c.getRevision({ id, commitId: "2" }, md, cb));
      expect(revision.network?.studySummaries).to.deep.equal([deep]);
      const diff = await call<{ diff?: Record<string, unknown> }>((cb) => c.diffRevisions({ id, left: "2", right: "1" }, md, cb));
      expect(diff.diff?.studySummaries).to.deep.equal([[deep], []]);
    });

    it("refuses documents over 1 MiB and JSON fields of more than 10,000 values", async () => {
      const base = { name: [{ lang: "en", value: "Big" }] };
      await expectRefused("POST", "/ws/draft/networks", /the network takes \d+ bytes as JSON; at most 1048576/, {
        ...base,
        content: JSON.stringify({ s: "x".repeat(1024 * 1024) }),
      });
      await expectRefused("POST", "/ws/draft/networks", /content holds more than 10000 values/, {
        ...base,
        content: JSON.stringify({ a: Array(10_000).fill(1) }),
      });
      await expectRefused("POST", "/ws/draft/networks", /memberships holds more than 10000 values/, {
        ...base,
        memberships: Array.from({ length: 10_001 }, () => ({})),
      });
      await expectStatus("POST", "/ws/draft/networks", 201, {
        ...base,
        id: "just-enough",
        content: JSON.stringify({ a: Array(9998).fill(1) }),
      });
    });

    it("indexes a description full of unclosed tags at once", async function () {
      // The tag-stripping regular expression took a minute on this description; the timeout only
      // tells an answer from a stall.
      this.timeout(10_000);
      const id = await fresh({ description: [{ lang: "en", value: `${"<".repeat(300_000)} needle` }] });
      const res = await expectStatus("GET", list("match(needle)"), 200);
      expect(res.json<{ id: string }[]>().map((n) => n.id)).to.deep.equal([id]);
    });
  });

  describe("ids, comments and list parameters", () => {
    it("answers a megabyte id with NOT_FOUND or INVALID_ARGUMENT quoting only its start", async () => {
      const long = "x".repeat(1_000_000);
      const get = await grpcAnswer((m, cb) => served.clients.networks.getNetwork({ id: long }, m, cb));
      expect(get.code, get.details.slice(0, 200)).to.equal(GRPC.NOT_FOUND);
      expect(get.details).to.equal(`No such network: ${"x".repeat(100)}…`);
      const create = await grpcAnswer((m, cb) => served.clients.networks.createNetwork({ network: grpcNetwork(long) }, m, cb));
      expect(create.code, create.details.slice(0, 200)).to.equal(GRPC.INVALID_ARGUMENT);
      expect(create.details).to.match(/^Invalid network id: "x{100}…"$/);
      const sort = await grpcAnswer((m, cb) => served.clients.networks.listNetworks({ sort: long, exclude: [] }, m, cb));
      expect(sort.code, sort.details.slice(0, 200)).to.equal(GRPC.INVALID_ARGUMENT);
      const id = await fresh();
      const revision = await grpcAnswer((m, cb) => served.clients.networks.getRevision({ id, commitId: long }, m, cb));
      expect(revision.code, revision.details.slice(0, 200)).to.equal(GRPC.NOT_FOUND);
    });

    it("derives ids that are valid and readable, and refuses . and ..", async () => {
      const capitals = await expectStatus("POST", "/ws/draft/networks", 201, { name: [{ lang: "en", value: "C".repeat(300) }] });
      const id = capitals.json<{ id: string }>().id;
      expect(id).to.equal("c".repeat(190));
      await expectStatus("GET", `/ws/draft/network/${id}`, 200);
      const again = await expectStatus("POST", "/ws/draft/networks", 201, { name: [{ lang: "en", value: "C".repeat(300) }] });
      expect(again.json<{ id: string }>().id).to.equal(`${"c".repeat(190)}-1`);
      for (const dots of [".", ".."]) {
        await expectRefused("POST", "/ws/draft/networks", /Invalid network id/, { id: dots, name: [{ lang: "en", value: "Dots" }] });
        await expectRefused("POST", "/ws/draft/networks", /Cannot derive an id/, {
          name: [{ lang: "en", value: "Dots" }],
          acronym: [{ lang: "en", value: dots }],
        });
      }
    });

    it("refuses a revision comment over 1000 characters", async () => {
      const id = await fresh();
      await expectRefused(
        "PUT",
        `/ws/draft/network/${id}/model?comment=${"c".repeat(1001)}`,
        /comment is 1001 characters long; at most 1000/,
        {},
      );
      await expectStatus("PUT", `/ws/draft/network/${id}/model?comment=${"c".repeat(1000)}`, 204, {});
    });

    it("refuses more than 10,000 excluded ids", async () => {
      const many = Array.from({ length: 100_000 }, (_, i) => `id${i}`);
      const answer = await grpcAnswer((m, cb) => served.clients.networks.listNetworks({ exclude: many }, m, cb));
      expect(answer.code, answer.details).to.equal(GRPC.INVALID_ARGUMENT);
      expect(answer.details).to.match(/exclude names more than 10000 ids/);
      const fine = await grpcAnswer((m, cb) => served.clients.networks.listNetworks({ exclude: [many.slice(0, 10_000).join(",")] }, m, cb));
      expect(fine.code, fine.details).to.equal(GRPC.OK);
    });
  });
});
