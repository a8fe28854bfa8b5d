import { expect } from "chai";
import fs from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { rest } from "../support/clients.js";
import { startTestServer, type TestServer } from "../support/server.js";

const SWAGGER_UI_DIR = path.dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
/** Without the background-networking flags Chromium keeps calling home, which a closed network answers slowly. */
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Debian's chromium (or chromium-browser) on PATH. */
function findChromium(): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    for (const name of ["chromium", "chromium-browser"]) {
      const file = path.join(dir, name);
      try {
        fs.accessSync(file, fs.constants.X_OK);
        return file;
      } catch {
        // not here
      }
    }
  }
  return undefined;
}

/** A GET with the path sent exactly as written (fetch would resolve `..` before sending). */
function rawGet(port: number, rawPath: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port, path: rawPath }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on("error", reject);
  });
}

describe("API docs page", () => {
  let server: TestServer;
  before(async () => (server = await startTestServer()));
  after(() => server?.stop());

  describe("files", () => {
    it("serves the page and swagger-ui-dist's files with their content types, without credentials", async () => {
      const page = await rest(server.url, "GET", "/docs");
      expect(page.status).to.equal(200);
      expect(page.headers.get("content-type")).to.equal("text/html; charset=utf-8");
      expect(page.headers.get("content-security-policy")).to.include("script-src 'self'");
      expect(page.text).to.include('src="/docs/assets/swagger-ui-bundle.js"');
      const bundle = await rest(server.url, "GET", "/docs/assets/swagger-ui-bundle.js");
      expect([bundle.status, bundle.headers.get("content-type")]).to.deep.equal([200, "text/javascript; charset=utf-8"]);
      expect(bundle.bytes.equals(fs.readFileSync(path.join(SWAGGER_UI_DIR, "swagger-ui-bundle.js")))).to.equal(true);
      const css = await rest(server.url, "GET", "/docs/assets/swagger-ui.css");
      expect([css.status, css.headers.get("content-type")]).to.deep.equal([200, "text/css; charset=utf-8"]);
    });

    it("serves nothing else of node_modules, whatever the path", async () => {
      // index.html is in swagger-ui-dist, but not in the list the page needs.
      expect((await rest(server.url, "GET", "/docs/assets/index.html")).status).to.equal(404);
      for (const p of [
        "/docs/assets/../../package.json",
        "/docs/assets/%2e%2e/%2e%2e/package.json",
        "/docs/assets/..%2f..%2fpackage.json",
        "/docs/assets/",
      ]) {
        expect(await rawGet(server.port, p), p).to.equal(404);
      }
    });

    it("answers 405 to other methods, 304 to a current ETag", async () => {
      const post = await rest(server.url, "POST", "/docs");
      expect([post.status, post.headers.get("allow")]).to.deep.equal([405, "GET, HEAD"]);
      const first = await rest(server.url, "GET", "/openapi.json");
      const again = await rest(server.url, "GET", "/openapi.json", { headers: { "if-none-match": first.headers.get("etag")! } });
      expect([again.status, again.text]).to.deep.equal([304, ""]);
    });
  });

  describe("in Chromium", function () {
    this.timeout(60_000);
    let browser: Browser | undefined;
    let page: Page;
    let shots: string;
    let failed = false;
    const requests: string[] = [];
    const problems: string[] = [];

    before(async () => {
      // npm test installs chromium (test/tools/prepare-tests.ts): its absence is a failure, never a skip.
      const executablePath = findChromium();
      if (!executablePath) throw new Error("no chromium on PATH (Debian: apt-get install chromium; npm test installs it as root)");
      browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS });
      shots = fs.mkdtempSync(path.join(os.tmpdir(), "rock-docs-"));
      page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      page.on("request", (r) => requests.push(r.url()));
      page.on("console", (m) => void (["error", "warning"].includes(m.type()) && problems.push(`${m.type()}: ${m.text()}`)));
      page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
      await page.goto(`${server.url}/docs`);
      await page.locator(".opblock").first().waitFor({ timeout: 30_000 });
    });
    afterEach(function () {
      failed ||= this.currentTest?.state === "failed";
    });
    after(async () => {
      await browser?.close();
      // A failed run keeps its screenshots (in the temporary folder) to look at.
      if (shots && failed) console.log(`      screenshots kept in ${shots}`);
      else if (shots) fs.rmSync(shots, { recursive: true, force: true });
    });

    it("lists the R and the network operations", async () => {
      const tags = await page.locator(".opblock-tag").evaluateAll((els) => els.map((e) => e.getAttribute("data-tag")));
      expect(tags).to.deep.equal(["RService", "NetworkService"]);
      const paths = await page.locator(".opblock-summary-path").evaluateAll((els) => els.map((e) => e.getAttribute("data-path")));
      expect(paths).to.include.members([
        "/_info",
        "/r/sessions",
        "/r/session/{id}/_eval",
        "/rserver/packages",
        "/ws/draft/networks",
        "/ws/draft/network/{id}",
      ]);
      const shot = path.join(shots, "docs.png");
      await page.screenshot({ path: shot, fullPage: true });
      expect(fs.readFileSync(shot).subarray(1, 4).toString()).to.equal("PNG");
    });

    it("calls GET /_info through try it out and shows the answer", async () => {
      const op = page.locator("#operations-RService-RService_GetInfo");
      await op.locator(".opblock-summary").click();
      await op.locator(".try-out__btn").click();
      await op.locator(".execute").click();
      const row = op.locator(".live-responses-table tbody .response").first();
      await row.waitFor({ timeout: 10_000 });
      await page.screenshot({ path: path.join(shots, "try-it.png") });
      expect(((await row.locator(".response-col_status").textContent()) ?? "").trim()).to.equal("200");
      const shown: unknown = JSON.parse((await row.locator(".response-col_description pre").first().textContent()) ?? "");
      expect(shown).to.deep.equal((await rest(server.url, "GET", "/_info")).json());
    });

    it("loads everything from this server, with no error in the page", () => {
      const origin = new URL(server.url).origin;
      expect(requests.filter((u) => new URL(u).origin !== origin)).to.deep.equal([]);
      expect(requests).to.include.members([`${origin}/openapi.json`, `${origin}/docs/assets/swagger-ui-bundle.js`, `${origin}/_info`]);
      expect(problems).to.deep.equal([]);
    });
  });
});
