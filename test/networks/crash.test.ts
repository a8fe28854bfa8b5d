import { expect } from "chai";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { NetworkCatalog } from "../../src/networks/catalog.js";
import { indexEntryOf } from "../../src/networks/search-entry.js";
import { openTempCatalog } from "./support.js";

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
