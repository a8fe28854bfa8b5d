/**
 * Fails when gen/ is not what `npm run gen` makes from proto/ now: regenerates into a temporary folder
 * and compares every file both ways. gen/openapi.json is built from the route table of the committed
 * gen/es (whose own staleness this reports too) and src/. gen/r/protocol.R (the R side's constants of
 * the protocol) is made from src/r/wire/protocol-table.ts and compared with the rest of gen/. Fails too when
 * a page of docs/ that `npm run gen` writes is stale (generated-docs.ts): docs/api.md (made as
 * gen/openapi.json is, from the committed gen/ and src/openapi/) and the configuration table (from
 * src/config/settings.ts).
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describedApiText } from "../../src/openapi/described.js";
import { GENERATED_DOCS, staleDocs } from "./generated-docs.js";
import { rProtocolFile } from "./r-protocol.js";

const root = path.resolve(import.meta.dirname, "../..");
const bin = path.join(root, "node_modules/.bin");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rock-gen-"));
const env = { ...process.env, PATH: `${bin}${path.delimiter}${process.env.PATH ?? ""}`, BUF_CACHE_DIR: path.join(tmp, "cache") };
try {
  execFileSync("npm", ["run", "--silent", "proto-deps"], { cwd: root, env, stdio: "inherit" });
  execFileSync(path.join(bin, "buf"), ["lint"], { cwd: root, env, stdio: "inherit" });
  execFileSync(path.join(bin, "buf"), ["generate", "-o", path.join(tmp, "out")], { cwd: root, env, stdio: "inherit" });
  const list = (dir: string): string[] =>
    fs.existsSync(dir)
      ? (fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as fs.Dirent[])
          .filter((d) => d.isFile())
          .map((d) => path.relative(dir, path.join(d.parentPath, d.name)))
          .sort()
      : [];
  const fresh = path.join(tmp, "out", "gen");
  fs.writeFileSync(path.join(fresh, "openapi.json"), describedApiText());
  fs.mkdirSync(path.join(fresh, "r"));
  fs.writeFileSync(path.join(fresh, "r", "protocol.R"), rProtocolFile());
  const committed = path.join(root, "gen");
  const a = list(fresh);
  const b = list(committed);
  const stale = [
    ...a.filter((f) => !b.includes(f)).map((f) => `missing in gen/: ${f}`),
    ...b.filter((f) => !a.includes(f)).map((f) => `not generated from proto/: gen/${f}`),
    ...a
      .filter((f) => b.includes(f) && !fs.readFileSync(path.join(fresh, f)).equals(fs.readFileSync(path.join(committed, f))))
      .map((f) => `differs: gen/${f}`),
  ];
  stale.push(...staleDocs(root));
  if (stale.length > 0) {
    console.error(`generated files are stale; run \`npm run gen\` and commit:\n  ${stale.join("\n  ")}`);
    process.exitCode = 1;
  } else {
    console.log(`gen/ matches proto/ (${a.length} files); ${GENERATED_DOCS.map((d) => d.file).join(", ")} match what they are made from`);
  }
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
