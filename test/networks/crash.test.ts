import { expect } from "chai";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { NetworkCatalog } from "../../src/networks/catalog.js";
import { indexEntryOf } from "../../src/networks/search/search-entry.js";
import { rest } from "../support/clients.js";
import { spawnServer, type ServerProcess } from "./server-support.js";
import { openTempCatalog } from "./support.js";

const JSON_BODY = { "content-type": "application/json" };

const WRITER = fileURLToPath(new URL("./crash-writer.ts", import.meta.url));

/** Starts the writer, lets it acknowledge `acks` writes, SIGKILLs it, and returns what it acknowledged. */
async function killMidStream(dir: string, acks: number): Promise<string[]> {
  const child = spawn(process.execPath, ["--import", "tsx", WRITER, dir], { stdio: ["ignore", "pipe", "inherit"] });
  const lines: string[] = [];
  let buffered = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split("\n");
    buffered = parts.pop()!;
    lines.push(...parts);
    if (lines.length >= acks && child.exitCode === null) child.kill("SIGKILL");
  });
  const [code, signal] = (await once(child, "exit")) as [number | null, string | null];
  expect(signal, `writer exited with ${code} before being killed`).to.equal("SIGKILL");
  return lines;
}

describe("network catalogue after a crash", function () {
  this.timeout(60_000);

  it("reopens with every acknowledged write whole and its index agreeing", async () => {
    const t = await openTempCatalog();
    await t.catalog.close();
    const folder = join(t.dir, "networks");
    const acked = await killMidStream(folder, 1500);
    const catalog = await NetworkCatalog.open(folder);
    t.catalog = catalog;
    try {
      const minimum = new Map<string, number>();
      for (const line of acked) {
        const [kind, id, ahead] = line.split(" ");
        minimum.set(id!, kind === "created" ? 1 : Number(ahead));
      }
      expect(minimum.size).to.be.greaterThan(100);
      for (const [id, ahead] of minimum) {
        const record = catalog.get(id);
        expect(record.state.revisionsAhead, id).to.be.at.least(ahead);
      }
      // Every stored network, acknowledged or caught mid-write, must be whole.
      for (const { document } of catalog.list({}).page) {
        const record = catalog.get(document.id);
        const revisions = await catalog.revisions(document.id);
        expect(revisions.length, document.id).to.equal(record.state.revisionsAhead);
        expect(revisions[0]!.revision.document, document.id).to.deep.equal(record.document);
        expect(await catalog.storedEntry(document.id), document.id).to.deep.equal(indexEntryOf(record));
      }
      const last = [...minimum.keys()].at(-1)!;
      expect(catalog.list({ query: `eq(id,${last})` }).total).to.equal(1);
    } finally {
      await t.dispose();
    }
  });
});

interface Acked {
  /** Last acknowledged save number of the network (0 = its creation). */
  seq: number;
  /** A save sent but not answered when the server died: it may or may not have been committed. */
  inFlight?: number;
  readonly token: string;
}

/** What the writers put in a network at save `seq`: name and model must always agree. */
function body(id: string, token: string, seq: number): string {
  return JSON.stringify({
    id,
    name: [{ lang: "en", value: `Crash ${token} rev ${seq}` }],
    studyIds: [`s${seq % 4}`],
    content: JSON.stringify({ seq, pad: "x".repeat(seq * 37) }),
  });
}

describe("server process killed mid-stream", function () {
  this.timeout(120_000);
  let dir: string;
  let server: ServerProcess | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "networks-crash-"));
  });
  afterEach(async () => {
    await server?.kill();
    server = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  it("restarts with every acknowledged REST write whole and its index agreeing", async () => {
    server = await spawnServer(dir);
    const url = server.url;
    const acked = new Map<string, Acked>();
    let acks = 0;
    const killed = server.kill;
    let killing: Promise<void> | undefined;
    const loop = async (w: number) => {
      const mine: string[] = [];
      for (let k = 0; ; k++) {
        const create = k % 3 === 0 || mine.length === 0;
        const id = create ? `p${w}-${k}` : mine[(k * 7) % mine.length]!;
        const entry: Acked = create ? { seq: -1, token: `tok${w}n${k}` } : acked.get(id)!;
        const seq = entry.seq + 1;
        if (create) acked.set(id, entry);
        entry.inFlight = seq;
        let status: number;
        try {
          const res = create
            ? await rest(url, "POST", "/ws/draft/networks", { user: "cadmin", headers: JSON_BODY, body: body(id, entry.token, seq) })
            : await rest(url, "PUT", `/ws/draft/network/${id}`, { user: "cadmin", headers: JSON_BODY, body: body(id, entry.token, seq) });
          status = res.status;
        } catch {
          return; // the server is gone
        }
        expect(status).to.equal(create ? 201 : 204);
        entry.seq = seq;
        delete entry.inFlight;
        if (create) mine.push(id);
        // SIGKILL while the other loops still have requests on the wire.
        if (++acks === 400) killing = killed();
      }
    };
    await Promise.all([0, 1, 2, 3, 4, 5].map(loop));
    await killing;
    expect(server.child.signalCode).to.equal("SIGKILL");
    // Creations that were never answered are not promised; drop those that did not land below.
    server = await spawnServer(dir);
    const restarted = server.url;
    const get = async (path: string) => {
      const res = await rest(restarted, "GET", path, { user: "cadmin" });
      return { status: res.status, json: <T>() => res.json<T>(), total: Number(res.headers.get("x-total-count")) };
    };

    const all = await get("/ws/draft/networks");
    const listed = new Set(all.json<{ id: string }[]>().map((n) => n.id));
    let checked = 0;
    for (const [id, entry] of acked) {
      if (entry.seq < 0) {
        // Creation in flight at the kill: present whole or absent, both are fine.
        if (!listed.has(id)) continue;
      } else {
        expect(listed.has(id), `${id} acknowledged but not listed`).to.equal(true);
        checked++;
      }
      const res = await get(`/ws/draft/network/${id}`);
      expect(res.status, id).to.equal(200);
      const n = res.json<{
        name: { value: string }[];
        content: string;
        studyIds: string[];
        "vendor.catalog.EntityStateDto.state": { revisionsAhead: number };
      }>();
      const model = JSON.parse(n.content) as { seq: number; pad: string };
      // Whole: name, studies and model all come from one save, and that save is the acknowledged one
      // or the single one that was on the wire after it.
      expect([entry.seq, entry.inFlight], id).to.include(model.seq);
      expect(n.name[0]!.value, id).to.equal(`Crash ${entry.token} rev ${model.seq}`);
      expect(n.studyIds, id).to.deep.equal([`s${model.seq % 4}`]);
      expect(model.pad, id).to.equal("x".repeat(model.seq * 37));
      expect(n["vendor.catalog.EntityStateDto.state"].revisionsAhead, id).to.equal(model.seq + 1);
      const commits = await get(`/ws/draft/network/${id}/commits`);
      expect(commits.json<unknown[]>(), id).to.have.length(model.seq + 1);
      entry.seq = model.seq;
    }
    expect(checked).to.be.greaterThan(100);

    /** Per network, what the index answers: its full-text token and its model value find it. */
    const answers = async () => {
      const out: Record<string, [number, number, number]> = {};
      for (const [id, entry] of acked) {
        if (!listed.has(id)) continue;
        const byWord = await get(`/ws/draft/networks?query=${encodeURIComponent(`match(${entry.token})`)}`);
        const byValue = await get(`/ws/draft/networks?query=${encodeURIComponent(`and(eq(id,${id}),eq(model.seq,${entry.seq}))`)}`);
        const byStudy = await get(`/ws/draft/networks?study=s${entry.seq % 4}&query=${encodeURIComponent(`eq(id,${id})`)}`);
        expect(
          byWord.json<{ id: string }[]>().map((x) => x.id),
          id,
        ).to.include(id);
        out[id] = [byWord.total, byValue.total, byStudy.total];
      }
      return out;
    };
    const before = await answers();
    for (const [id, [, byValue, byStudy]] of Object.entries(before)) expect([byValue, byStudy], id).to.deep.equal([1, 1]);
    const rebuilt = await rest(restarted, "PUT", "/ws/draft/networks/_index", { user: "cadmin" });
    expect(rebuilt.status).to.equal(200);
    expect(await answers()).to.deep.equal(before);
  });
});
