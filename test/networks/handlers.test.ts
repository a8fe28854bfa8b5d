import { expect } from "chai";
import { create, toJson, type JsonObject, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { createServiceImplSpec } from "@connectrpc/connect";
import { invokeUnaryImplementation } from "@connectrpc/connect/protocol";
import type { FaultKind } from "../../src/errors/fault.js";
import {
  NetworkSchema,
  NetworkService,
  NetworkSummarySchema,
  RevisionSchema,
  type ListNetworksRequestSchema,
  type Network,
} from "../../gen/es/rock/networks/v1/networks_pb.js";
import { createNetworkServiceHandlers } from "../../src/networks/service/handlers.js";
import type { Caller } from "../../src/auth/caller.js";
import { admin, contextFor, editor, openTempCatalog, outsider, rejection, reviewer } from "./support.js";

type Method = keyof typeof NetworkService.method;
type In<M extends Method> = (typeof NetworkService.method)[M]["input"];
type Out<M extends Method> = (typeof NetworkService.method)[M]["output"];

const T0 = "2026-03-01T10:00:00.000Z";
const ALL = { view: true, edit: true, delete: true, publish: true };
const EDITOR = { view: true, edit: true, delete: false, publish: false };

function network(init: MessageInitShape<typeof NetworkSchema>): Network {
  return create(NetworkSchema, init);
}

describe("NetworkService handlers", () => {
  let t: Awaited<ReturnType<typeof openTempCatalog>>;
  let clock: Date;
  let h: ReturnType<typeof createNetworkServiceHandlers>;
  beforeEach(async () => {
    clock = new Date(T0);
    t = await openTempCatalog({ now: () => clock });
    h = createNetworkServiceHandlers(t.catalog);
  });
  afterEach(async () => {
    await t.dispose();
  });

  /** Calls a handler as the router would (Connect's own invocation): request and response as messages, context with the caller. */
  async function rpc<M extends Method>(who: Caller, method: M, init: MessageInitShape<In<M>>) {
    const desc = NetworkService.method[method];
    const ctx = contextFor(who, method);
    const spec = createServiceImplSpec<typeof NetworkService>(NetworkService, h).methods[method];
    if (spec?.kind !== "unary") throw new Error(`${method} is not unary`);
    const out = await invokeUnaryImplementation(spec, ctx, create(desc.input as In<M>, init), []);
    // The spec's methods are keyed by name: the per-method output type is the descriptor's.
    return { res: out as MessageShape<Out<M>>, ctx };
  }

  function createAs(who: Caller, network: Network, comment?: string) {
    return rpc(who, "createNetwork", { network, ...(comment ? { comment } : {}) });
  }

  async function getAs(who: Caller, id: string, key?: string): Promise<JsonObject> {
    const { res } = await rpc(who, "getNetwork", { id, ...(key ? { key } : {}) });
    return toJson(NetworkSchema, res.network!) as JsonObject;
  }

  async function list(who: Caller, req: MessageInitShape<typeof ListNetworksRequestSchema> = {}) {
    const { res, ctx } = await rpc(who, "listNetworks", req);
    return { json: res.networks.map((n) => toJson(NetworkSummarySchema, n) as JsonObject), total: ctx.responseHeader.get("x-total-count") };
  }

  it("creates, answering the network in the shape of §2.1", async () => {
    const { res } = await createAs(
      editor,
      network({
        name: [
          { lang: "fr", value: "Réseau Santé" },
          { lang: "en", value: "Health Network" },
          { lang: "de", value: "" },
        ],
        description: [],
        content: ' { "b": [1, 2], "a": {"c": null} } ',
      }),
    );
    expect(toJson(NetworkSchema, res.network!)).to.deep.equal({
      id: "hn-rs",
      name: [
        { lang: "en", value: "Health Network" },
        { lang: "fr", value: "Réseau Santé" },
      ],
      content: '{"b":[1,2],"a":{"c":null}}',
      permissions: EDITOR,
      published: false,
      timestamps: { created: T0, lastUpdate: T0 },
      "vendor.catalog.EntityStateDto.state": { revisionsAhead: 1, revisionStatus: "DRAFT", permissions: EDITOR },
    });
  });

  it("shows every set field, published state included, to an administrator", async () => {
    await createAs(
      admin,
      network({
        id: "full",
        name: [{ lang: "en", value: "Full" }],
        acronym: [{ lang: "en", value: "F" }],
        description: [{ lang: "en", value: "<p>d</p>" }],
        studyIds: ["s1"],
        studySummaries: [{ id: "s1", n: 2 }],
        memberships: [{ role: "contact" }],
        networkIds: ["other"],
        logo: { id: "l1", fileName: "logo.png", type: "png", size: 12, md5: "abc", timestamps: { created: T0 } },
      }),
    );
    clock = new Date("2026-03-02T11:22:33.444Z");
    await rpc(reviewer, "publish", { id: "full" });
    expect(await getAs(admin, "full")).to.deep.equal({
      id: "full",
      name: [{ lang: "en", value: "Full" }],
      acronym: [{ lang: "en", value: "F" }],
      description: [{ lang: "en", value: "<p>d</p>" }],
      content: "{}",
      studyIds: ["s1"],
      studySummaries: [{ id: "s1", n: 2 }],
      memberships: [{ role: "contact" }],
      networkIds: ["other"],
      logo: { id: "l1", fileName: "logo.png", type: "png", size: 12, md5: "abc", timestamps: { created: T0 } },
      permissions: ALL,
      published: true,
      timestamps: { created: T0, lastUpdate: T0 },
      "vendor.catalog.EntityStateDto.state": {
        publishedTag: "1",
        revisionsAhead: 0,
        revisionStatus: "DRAFT",
        publicationDate: "2026-03-02T11:22:33.444Z",
        publishedBy: "rita",
        publishedId: "1",
        permissions: ALL,
      },
    });
  });

  it("lists summaries with the summary state key and X-Total-Count", async () => {
    await createAs(admin, network({ id: "a", name: [{ lang: "en", value: "A" }], studyIds: ["s"], content: '{"x":1}' }));
    await createAs(admin, network({ id: "b", name: [{ lang: "en", value: "B" }] }));
    const { json, total } = await list(reviewer, { limit: 1 });
    expect(total).to.equal("2");
    expect(json).to.deep.equal([
      {
        id: "a",
        timestamps: { created: T0, lastUpdate: T0 },
        name: [{ lang: "en", value: "A" }],
        published: false,
        studyIds: ["s"],
        permissions: ALL,
        "vendor.catalog.EntityStateDto.networkSummaryState": { revisionsAhead: 1, revisionStatus: "DRAFT", permissions: ALL },
      },
    ]);
    expect((await list(editor, { exclude: ["a"] })).json.map((n) => n.id)).to.deep.equal(["b"]);
    expect(await list(outsider)).to.deep.equal({ json: [], total: "0" });
    const e = await rejection(() => list(admin, { filter: "NOPE" }));
    expect(e.kind).to.equal("invalid");
  });

  it("updates, puts and gets the model", async () => {
    await createAs(editor, network({ id: "m", name: [{ lang: "en", value: "M" }] }));
    await rpc(editor, "updateNetwork", {
      id: "m",
      network: network({ name: [{ lang: "en", value: "M2" }], content: '{"k":1}' }),
      comment: "c",
    });
    await rpc(editor, "updateModel", { id: "m", model: { k: 2, l: [true] } });
    const model = await rpc(editor, "getModel", { id: "m" });
    expect(model.res).to.deep.include({ model: { k: 2, l: [true] } });
    const got = await getAs(editor, "m");
    expect([got.content, got.name]).to.deep.equal(['{"k":2,"l":[true]}', [{ lang: "en", value: "M2" }]]);
    const revs = await rpc(editor, "listRevisions", { id: "m" });
    expect(revs.res.revisions.map((r) => toJson(RevisionSchema, r))).to.deep.equal([
      { commitId: "3", author: "ed", date: T0, isHead: true, isPublished: false },
      { commitId: "2", author: "ed", date: T0, comment: "c", isHead: false, isPublished: false },
      { commitId: "1", author: "ed", date: T0, isHead: false, isPublished: false },
    ]);
    const view = await rpc(editor, "getRevision", { id: "m", commitId: "1" });
    expect(toJson(NetworkSchema, view.res.network!)).to.deep.include({ name: [{ lang: "en", value: "M" }], content: "{}" });
    const diff = await rpc(editor, "diffRevisions", { id: "m", left: "2", right: "3" });
    expect(diff.res).to.deep.include({ diff: { model: [{ k: 1 }, { k: 2, l: [true] }] } });
    await rpc(editor, "restoreRevision", { id: "m", commitId: "1" });
    expect((await getAs(editor, "m"))["vendor.catalog.EntityStateDto.state"]).to.deep.include({ revisionsAhead: 4 });
  });

  it("maps every failure to its kind", async () => {
    await createAs(admin, network({ id: "x", name: [{ lang: "en", value: "X" }] }));
    await createAs(admin, network({ id: "y", name: [{ lang: "en", value: "Y" }], networkIds: ["x"] }));
    const cases: [string, () => unknown, FaultKind][] = [
      ["create existing id", () => createAs(admin, network({ id: "x", name: [{ lang: "en", value: "X" }] })), "conflict"],
      ["create without name", () => createAs(admin, network({ id: "z" })), "invalid"],
      [
        "create with bad content",
        () => createAs(admin, network({ id: "z", name: [{ lang: "en", value: "Z" }], content: "[1]" })),
        "invalid",
      ],
      [
        "update other body id",
        () => rpc(admin, "updateNetwork", { id: "x", network: network({ id: "y", name: [{ lang: "en", value: "X" }] }) }),
        "invalid",
      ],
      [
        "update missing",
        () => rpc(admin, "updateNetwork", { id: "nope", network: network({ name: [{ lang: "en", value: "X" }] }) }),
        "not_found",
      ],
      ["update without name", () => rpc(admin, "updateNetwork", { id: "x", network: network({}) }), "invalid"],
      ["get missing", () => getAs(admin, "nope"), "not_found"],
      ["model of missing", () => rpc(admin, "getModel", { id: "nope" }), "not_found"],
      ["status missing", () => rpc(admin, "setStatus", { id: "nope", value: "BAD" }), "not_found"],
      ["status bad value", () => rpc(admin, "setStatus", { id: "x", value: "PUBLISHED" }), "invalid"],
      ["publish missing", () => rpc(admin, "publish", { id: "nope" }), "not_found"],
      ["unpublish missing", () => rpc(admin, "unpublish", { id: "nope" }), "not_found"],
      ["delete missing", () => rpc(admin, "deleteNetwork", { id: "nope" }), "not_found"],
      ["delete included", () => rpc(admin, "deleteNetwork", { id: "x" }), "conflict"],
      ["index missing", () => rpc(admin, "indexNetwork", { id: "nope" }), "not_found"],
      ["commits of missing", () => rpc(admin, "listRevisions", { id: "nope" }), "not_found"],
      ["view missing revision", () => rpc(admin, "getRevision", { id: "x", commitId: "9" }), "not_found"],
      ["diff without left", () => rpc(admin, "diffRevisions", { id: "x", left: "", right: "1" }), "invalid"],
      ["share key bad day", () => rpc(admin, "createShareKey", { id: "x", expire: "2026-02-30" }), "invalid"],
      ["share key past day", () => rpc(admin, "createShareKey", { id: "x", expire: "2026-03-01" }), "invalid"],
      ["share key missing", () => rpc(admin, "createShareKey", { id: "nope", expire: "2026-03-05" }), "not_found"],
      ["get without role", () => getAs(outsider, "x"), "forbidden"],
      ["get missing without role", () => getAs(outsider, "nope"), "forbidden"],
    ];
    for (const [what, op, kind] of cases) expect((await rejection(op)).kind, what).to.equal(kind);
    const e = await rejection(() => rpc(admin, "deleteNetwork", { id: "x" }));
    expect(e.details.body).to.deep.equal({ network: ["y"] });
  });

  it("puts the caller's permissions in documents, per role", async () => {
    await createAs(admin, network({ id: "p", name: [{ lang: "en", value: "P" }] }));
    for (const [who, perms] of [
      [admin, ALL],
      [reviewer, ALL],
      [editor, EDITOR],
    ] as const) {
      const json = await getAs(who, "p");
      expect(json.permissions).to.deep.equal(perms);
      expect((json["vendor.catalog.EntityStateDto.state"] as { permissions: unknown }).permissions).to.deep.equal(perms);
      expect((await list(who)).json[0]!.permissions).to.deep.equal(perms);
    }
  });

  it("grants view with a share key of that network until its expiry day begins", async () => {
    await createAs(admin, network({ id: "s", name: [{ lang: "en", value: "S" }] }));
    await createAs(admin, network({ id: "o", name: [{ lang: "en", value: "O" }] }));
    const res = await rpc(editor, "createShareKey", { id: "s", expire: "2026-03-03" });
    expect(res.res.key!.contentType).to.equal("text/plain");
    const key = new TextDecoder().decode(res.res.key!.data);
    const viewed = await getAs(outsider, "s", key);
    expect(viewed.permissions).to.deep.equal({ view: true, edit: false, delete: false, publish: false });
    expect((await rejection(() => getAs(outsider, "o", key))).kind, "other id").to.equal("forbidden");
    const [payload, sig] = key.split(".");
    const forged = `${Buffer.from("o\n2026-03-03").toString("base64url")}.${sig}`;
    expect((await rejection(() => getAs(outsider, "o", forged))).kind, "forged").to.equal("forbidden");
    expect((await rejection(() => getAs(outsider, "s", `${payload}.x`))).kind, "bad signature").to.equal("forbidden");
    clock = new Date("2026-03-02T23:59:59.999Z");
    await getAs(outsider, "s", key);
    clock = new Date("2026-03-03T00:00:00.000Z");
    expect((await rejection(() => getAs(outsider, "s", key))).kind, "expired").to.equal("forbidden");
    await rpc(admin, "deleteNetwork", { id: "s" });
    clock = new Date(T0);
    expect((await rejection(() => getAs(outsider, "s", key))).kind, "deleted network").to.equal("not_found");
  });

  it("rebuilds indices", async () => {
    await createAs(admin, network({ id: "i", name: [{ lang: "en", value: "Index Me" }] }));
    await rpc(admin, "rebuildIndex", {});
    await rpc(admin, "indexNetwork", { id: "i" });
    expect((await list(admin, { query: "match(ind*)" })).json.map((n) => n.id)).to.deep.equal(["i"]);
  });

  it("changes status, publishes, unpublishes and deletes", async () => {
    await createAs(admin, network({ id: "w", name: [{ lang: "en", value: "W" }] }));
    await rpc(reviewer, "setStatus", { id: "w", value: "UNDER_REVIEW" });
    expect((await list(admin, { filter: "UNDER_REVIEW" })).json.map((n) => n.id)).to.deep.equal(["w"]);
    await rpc(reviewer, "publish", { id: "w" });
    expect((await getAs(admin, "w")).published).to.equal(true);
    await rpc(reviewer, "unpublish", { id: "w" });
    expect((await getAs(admin, "w")).published).to.equal(false);
    await rpc(reviewer, "deleteNetwork", { id: "w" });
    expect(await list(admin)).to.deep.equal({ json: [], total: "0" });
  });
});
