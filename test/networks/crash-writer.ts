/**
 * Standalone writer for the crash test: opens a catalogue in the folder given as argument and writes
 * creates and updates until killed, printing `created <id>` / `updated <id> <revisionsAhead>` after
 * each write is acknowledged.
 */
import { NetworkCatalog } from "../../src/networks/catalog.js";

const dir = process.argv[2];
if (!dir) {
  process.stderr.write("usage: crash-writer <folder>\n");
  process.exit(2);
}
const catalog = await NetworkCatalog.open(dir);
const ids: string[] = [];
for (let i = 0; ; i++) {
  const text = `Network ${i} ${"Santé ".repeat(i % 5)}`;
  if (i % 3 === 0 || ids.length === 0) {
    const r = await catalog.create(
      { name: [{ lang: "en", value: text }], acronym: [{ lang: "en", value: `N${i}` }], model: { i } },
      "writer",
    );
    ids.push(r.document.id);
    process.stdout.write(`created ${r.document.id}\n`);
  } else {
    const id = ids[i % ids.length]!;
    const r = await catalog.update(
      id,
      { name: [{ lang: "en", value: text }], studyIds: [`s${i}`], model: { i, big: "x".repeat(i % 2000) } },
      "writer",
    );
    process.stdout.write(`updated ${id} ${r.state.revisionsAhead}\n`);
  }
}
