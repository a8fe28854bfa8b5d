/**
 * The README's examples, run against a real server so that none can rot. A fenced block is marked by the
 * HTML comment on the line before it:
 * - `<!-- example -->` before a `sh` block: run with `sh -e` from the checkout, `$ROCK` the server's URL
 *   (its users are test/support/server.ts's: `admin` has the password `admin`), rockr found in the setup
 *   library (R_LIBS), buf's cache in a folder of the test; it must exit 0, and print what the
 *   `<!-- output -->` block after it shows: each of its lines, in order, is a whole line of what it
 *   printed (trailing blanks aside), `…` standing for any text and a line of `…` alone for any lines;
 * - `<!-- example -->` before a `yaml` block: a configuration file the service loads as it is;
 * - `<!-- not run: why -->`: a block that installs or starts something, shown but not run.
 * Every `sh` block of the README is marked one way or the other, and every example has its output.
 */
import { expect } from "chai";
import { execa } from "execa";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { defaults, loadConfig } from "../../src/config/load.js";
import { startTestServer, type TestServer } from "../support/server.js";

const root = path.resolve(import.meta.dirname, "../..");

interface Block {
  /** The fence's info string: `sh`, `yaml`, `text`. */
  readonly info: string;
  /** `example`, `output`, `not run: …`, or undefined when the line before the fence is no marker. */
  readonly marker: string | undefined;
  readonly code: string;
  /** 1-based, of the opening fence. */
  readonly line: number;
}

function fencedBlocks(markdown: string): Block[] {
  const lines = markdown.split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    let end = i + 1;
    while (end < lines.length && lines[end] !== "```") end++;
    let before = i - 1;
    while (before >= 0 && lines[before]!.trim() === "") before--;
    const marker = before >= 0 ? /^<!-- (example|output|not run: .+) -->$/.exec(lines[before]!)?.[1] : undefined;
    blocks.push({ info: open[1]!, marker, code: lines.slice(i + 1, end).join("\n"), line: i + 1 });
    i = end;
  }
  return blocks;
}

interface Example {
  readonly block: Block;
  readonly output: Block | undefined;
}

function examplesOf(blocks: readonly Block[]): Example[] {
  const examples: Example[] = [];
  for (const [i, block] of blocks.entries()) {
    if (block.marker !== "example") continue;
    const next = blocks[i + 1];
    examples.push({ block, output: next?.marker === "output" ? next : undefined });
  }
  return examples;
}

/** Whether every line of `expected` is, in order, a whole line of `actual` (`…` any text; `…` alone any lines). */
function printsAsShown(actual: string, expected: string): boolean {
  const got = actual.split("\n").map((l) => l.trimEnd());
  let at = 0;
  for (const want of expected.split("\n").filter((l) => l.trim() !== "" && l.trim() !== "…")) {
    const pattern = new RegExp(`^${want.split("…").map(escapeRegExp).join(".*")}$`);
    while (at < got.length && !pattern.test(got[at]!)) at++;
    if (at === got.length) return false;
    at++;
  }
  return true;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

const README = fs.readFileSync(path.join(root, "README.md"), "utf8");
const BLOCKS = fencedBlocks(README);
const EXAMPLES = examplesOf(BLOCKS);

describe("the README's examples", function () {
  this.timeout(120_000);

  it("marks every sh block as an example or as not run, gives every example its output, and starts with the two commands", () => {
    const unmarked = BLOCKS.filter((b) => b.info === "sh" && b.marker !== "example" && !b.marker?.startsWith("not run: "));
    expect(unmarked.map((b) => `README.md:${b.line}`)).to.deep.equal([]);
    const withoutOutput = EXAMPLES.filter((e) => e.block.info === "sh" && !e.output);
    expect(withoutOutput.map((e) => `README.md:${e.block.line}`)).to.deep.equal([]);
    const strayOutputs = BLOCKS.filter((b, i) => b.marker === "output" && BLOCKS[i - 1]?.marker !== "example");
    expect(strayOutputs.map((b) => `README.md:${b.line}`)).to.deep.equal([]);
    expect(EXAMPLES.filter((e) => e.block.info === "sh").length).to.be.at.least(6);
    // The README's first two commands, which .ci/run and the fresh-machine smoke test run as written.
    const [start, test] = BLOCKS.filter((b) => b.info === "sh");
    expect(start?.code).to.equal("npm install && npm start");
    expect(test?.code).to.equal("npm install && npm test");
    const ci = fs.readFileSync(path.join(root, ".ci/run"), "utf8").trimEnd().split("\n");
    expect(ci[ci.length - 1]).to.equal(test?.code);
  });

  it("compares output as shown: lines in order, … for what changes", () => {
    expect(printsAsShown("a\nid 12\nb  \nc", "id …\nc")).to.equal(true);
    expect(printsAsShown("a\nb", "b\na")).to.equal(false);
    expect(printsAsShown("x.y", "x…y")).to.equal(true);
    expect(printsAsShown("xay", "x.y")).to.equal(false);
    expect(printsAsShown("{\n  1\n}", "{\n…\n}")).to.equal(true);
  });

  describe("against a real server", () => {
    let server: TestServer;
    let bufCache: string;
    before(async function () {
      this.timeout(60_000);
      server = await startTestServer({ r: { startOnBoot: true } });
      bufCache = fs.mkdtempSync(path.join(os.tmpdir(), "rock-readme-buf-"));
    });
    after(async () => {
      await server?.stop();
      if (bufCache) fs.rmSync(bufCache, { recursive: true, force: true });
    });

    for (const { block, output } of EXAMPLES.filter((e) => e.block.info === "sh")) {
      it(`runs README.md:${block.line}: ${block.code.split("\n")[0]}`, async () => {
        const env = { ROCK: server.url, R_LIBS: defaults().r.setupLibrary, BUF_CACHE_DIR: bufCache };
        const r = await execa("sh", ["-e", "-c", block.code], { cwd: root, env, reject: false, timeout: 90_000 });
        expect(r.exitCode, `exit status; stderr:\n${r.stderr}\nstdout:\n${r.stdout}`).to.equal(0);
        expect(printsAsShown(r.stdout, output!.code), `prints what README.md:${output!.line} shows; it printed:\n${r.stdout}`).to.equal(
          true,
        );
      });
    }
  });

  for (const { block } of EXAMPLES.filter((e) => e.block.info === "yaml")) {
    it(`loads README.md:${block.line} as a configuration file`, () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rock-readme-yaml-"));
      try {
        const file = path.join(dir, "rock.yaml");
        fs.writeFileSync(file, block.code);
        const config = loadConfig(file, {});
        expect(config.users.map((u) => u.name)).to.not.be.empty;
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
