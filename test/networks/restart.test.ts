import { expect } from "chai";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { rest } from "../support/clients.js";
import { startOnFolder, type FolderServer } from "./server-support.js";

const JSON_BODY = { "content-type": "application/json" };

/** Everything a client can read about the catalogue, as the server answers it over REST. */
async function snapshot(url: string) {
  const get = async (path: string) => {
    const res = await rest(url, "GET", path, { user: "cadmin" });
    expect(res.status, `${path}: ${res.text}`).to.equal(200);
    return { body: res.json<unknown>(), total: res.headers.get("x-total-count") };
  };
  const list = await get("/ws/draft/networks");
  const ids = (list.body as { id: string }[]).map((n) => n.id);
  const networks: Record<string, unknown> = {};
  for (const id of ids) {
    networks[id] = {
      network: (await get(`/ws/draft/network/${id}`)).body,
      model: (await get(`/ws/draft/network/${id}/model`)).body,
      commits: (await get(`/ws/draft/network/${id}/commits`)).body,
      first: (await get(`/ws/draft/network/${id}/commit/1/view`)).body,
    };
  }
  const searches: Record<string, unknown> = {};
  for (const q of [
    "query=match(sant%C3%A9)",
    "query=eq(published,true)",
    "query=like(name.en,heal*)",
    "query=eq(model.country,FR)",
    "query=exists(model.tags)",
    "filter=PUBLISHED",
    "filter=IN_EDITION",
    "filter=UNDER_REVIEW",
    "filter=TO_DELETE",
    "study=s2",
    "sort=name.en&order=desc&limit=2&from=1",
    "sort=lastModifiedDate",
  ]) {
    const res = await get(`/ws/draft/networks?${q}`);
    searches[q] = { ids: (res.body as { id: string }[]).map((n) => n.id), total: res.total };
  }
  return { list: list.body, networks, searches };
}

describe("network catalogue across a server restart", function () {
  this.timeout(60_000);
  let dir: string;
  let server: FolderServer | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "networks-restart-"));
  });
  afterEach(async () => {
    await server?.stop();
    server = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  it("serves every document, state, revision and search answer of the previous run", async () => {
    server = await startOnFolder(dir);
    const url = server.url;
    const write = async (method: string, path: string, body?: unknown, status = 204) => {
      const res = await rest(url, method, path, { user: "cadmin", ...(body ? { headers: JSON_BODY, body: JSON.stringify(body) } : {}) });
      expect(res.status, `${method} ${path}: ${res.text}`).to.equal(status);
    };
    await write(
      "POST",
      "/ws/draft/networks",
      {
        id: "health",
        name: [
          { lang: "en", value: "Health Network" },
          { lang: "fr", value: "Réseau Santé" },
        ],
        acronym: [{ lang: "en", value: "HN" }],
        studyIds: ["s1", "s2"],
        content: JSON.stringify({ country: "CA", tags: ["a"] }),
      },
      201,
    );
    await write(
      "POST",
      "/ws/draft/networks",
      { id: "birth", name: [{ lang: "en", value: "Birth Cohorts" }], studyIds: ["s2"], content: '{"country":"FR"}' },
      201,
    );
    await write("POST", "/ws/draft/networks", { id: "gone", name: [{ lang: "en", value: "Gone" }] }, 201);
    await write("POST", "/ws/draft/networks", { id: "review", name: [{ lang: "en", value: "Healing" }] }, 201);
    await write("PUT", "/ws/draft/network/health/_publish");
    await write("PUT", "/ws/draft/network/health/model", { country: "CA", tags: ["a", "b"] });
    await write("PUT", "/ws/draft/network/birth/_publish");
    await write("PUT", "/ws/draft/network/birth?comment=second", {
      name: [{ lang: "en", value: "Birth Cohorts" }],
      studyIds: ["s2", "s3"],
      content: '{"country":"FR"}',
    });
    await write("PUT", "/ws/draft/network/birth/_publish");
    await write("DELETE", "/ws/draft/network/birth/_publish");
    await write("PUT", "/ws/draft/network/review/_status?value=UNDER_REVIEW");
    await write("PUT", "/ws/draft/network/gone/_status?value=DELETED");
    await write("DELETE", "/ws/draft/network/gone");
    const keyAnswer = await rest(url, "PUT", "/ws/draft/network/health/_share_key?expire=2999-01-01", { user: "cadmin" });
    expect(keyAnswer.status).to.equal(200);

    const before = await snapshot(url);
    // The snapshot must hold what was written, or comparing two of them proves nothing.
    expect(Object.keys(before.networks)).to.deep.equal(["birth", "health", "review"]);
    expect((before.searches["filter=PUBLISHED"] as { ids: string[] }).ids).to.deep.equal(["health"]);
    expect((before.searches["filter=IN_EDITION"] as { ids: string[] }).ids).to.deep.equal(["health"]);
    expect((before.networks.birth as { commits: unknown[] }).commits).to.have.length(2);
    await server.stop();
    server = undefined;

    server = await startOnFolder(dir);
    expect(await snapshot(server.url)).to.deep.equal(before);
    // The share-key secret lives with the data: a key issued before the restart still opens the network.
    const shared = await rest(server.url, "GET", `/ws/draft/network/health?key=${encodeURIComponent(keyAnswer.text)}`, { user: "nobody" });
    expect(shared.status).to.equal(200);
    // A new publication continues the tag sequence instead of reusing a tag.
    const birth = await rest(server.url, "PUT", "/ws/draft/network/birth/_publish", { user: "cadmin" });
    expect(birth.status).to.equal(204);
    const state = (await rest(server.url, "GET", "/ws/draft/network/birth", { user: "cadmin" })).json<
      Record<string, { publishedTag: string }>
    >();
    expect(state["vendor.catalog.EntityStateDto.state"]!.publishedTag).to.equal("3");
  });
});
