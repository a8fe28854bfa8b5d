import { expect } from "chai";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describedRouteTable } from "../../src/openapi/described.js";
import { REST_CONTRACTS } from "../../src/rest-contracts.js";
import { API_DOC, slug } from "../tools/api-doc.js";
import { GENERATED_DOCS, staleDocs } from "../tools/generated-docs.js";

const root = path.resolve(import.meta.dirname, "../..");

describe("docs/api.md and the other generated pages", () => {
  it("are what `npm run gen` makes", () => {
    expect(staleDocs(root)).to.deep.equal([]);
  });

  it("are found stale by gen:check when edited by hand or missing", () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rock-docs-"));
    try {
      for (const doc of GENERATED_DOCS) {
        fs.mkdirSync(path.dirname(path.join(tmp, doc.file)), { recursive: true });
        fs.copyFileSync(path.join(root, doc.file), path.join(tmp, doc.file));
      }
      expect(staleDocs(tmp)).to.deep.equal([]);
      for (const doc of GENERATED_DOCS) {
        const file = path.join(tmp, doc.file);
        const text = fs.readFileSync(file, "utf8");
        // A line of the generated part changed: the page's first table row naming something in code,
        // which is generated in each (a parameter of docs/api.md, the first setting of the table).
        const first = text.split("\n").find((l) => l.startsWith("| `"))!;
        fs.writeFileSync(file, text.replace(first, first.replace("| `", "| `x")));
        expect(staleDocs(tmp), doc.file).to.deep.equal([`differs: ${doc.file} (${doc.source})`]);
        fs.rmSync(file);
        expect(staleDocs(tmp), doc.file).to.deep.equal([`missing: ${doc.file} (${doc.source})`]);
        fs.writeFileSync(file, text);
      }
      expect(staleDocs(tmp)).to.deep.equal([]);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it("names every RPC, with its gRPC path, and every REST route the server serves", () => {
    const page = fs.readFileSync(path.join(root, API_DOC), "utf8");
    for (const [service] of REST_CONTRACTS)
      for (const method of service.methods) {
        expect(page).to.include(`\n### ${service.name}.${method.name}\n`);
        expect(page).to.include(`\`POST /${service.typeName}/${method.name}\``);
      }
    for (const route of describedRouteTable().routes) {
      const openApiPath = `/${route.template.segments.map((s) => (s.kind === "literal" ? s.text : `{${s.field}}`)).join("/")}`;
      expect(page).to.include(`\n#### \`${route.httpMethod} ${openApiPath}\`\n`);
    }
  });

  it("links only to its own headings", () => {
    const page = fs.readFileSync(path.join(root, API_DOC), "utf8");
    const anchors = new Set(page.split("\n").flatMap((l) => (/^#{1,6} /.test(l) ? [slug(l.replace(/^#+ /, ""))] : [])));
    const links = [...page.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]!);
    expect(links.length).to.be.greaterThan(100);
    expect([...new Set(links.filter((l) => !anchors.has(l)))]).to.deep.equal([]);
  });
});
