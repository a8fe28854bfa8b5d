import { expect } from "chai";
import fs from "node:fs";
import path from "node:path";
import { slug } from "../tools/api-doc.js";

const root = path.resolve(import.meta.dirname, "../..");

/** The pages whose links are checked: the READMEs and docs/. */
function pages(): string[] {
  const docs = fs
    .readdirSync(path.join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`);
  return ["README.md", "src/README.md", "test/README.md", "test/bench/README.md", ...docs];
}

/** The page's text without its fenced blocks. */
function unfenced(text: string): string {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, "");
}

/** The page's text without its fenced blocks and code spans, where `[a](b)` is not a link. */
function prose(text: string): string {
  return unfenced(text).replace(/`[^`\n]*`/g, "");
}

/** The anchors GitHub gives the headings of a page (a repeated heading gets `-1`, `-2`…). */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of unfenced(text).split("\n")) {
    const heading = /^#{1,6} (.+)$/.exec(line);
    if (!heading) continue;
    const base = slug(heading[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

describe("the documentation's links", () => {
  it("lead to files and headings that exist, from the READMEs and every page of docs/", () => {
    const broken: string[] = [];
    let checked = 0;
    for (const page of pages()) {
      const text = fs.readFileSync(path.join(root, page), "utf8");
      const own = anchors(text);
      for (const [, target] of prose(text).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        checked++;
        const [file, anchor] = target!.split("#") as [string, string | undefined];
        const resolved = file === "" ? page : path.posix.normalize(path.posix.join(path.posix.dirname(page), file));
        const absolute = path.join(root, resolved);
        if (!fs.existsSync(absolute)) {
          broken.push(`${page}: ${target} (no ${resolved})`);
          continue;
        }
        if (anchor === undefined || fs.statSync(absolute).isDirectory()) continue;
        const there = file === "" ? own : anchors(fs.readFileSync(absolute, "utf8"));
        if (!there.has(anchor)) broken.push(`${page}: ${target} (no heading #${anchor} in ${resolved})`);
      }
    }
    expect(broken).to.deep.equal([]);
    expect(checked).to.be.greaterThan(100);
  });

  it("leave no section of the README named where it is no more", () => {
    // The README's sections that moved to docs/, named the way the code and the pages used to name them.
    const moved = [
      "Security model",
      "Several nodes",
      "Stopping and starting",
      "Container",
      "Configuration",
      "Logs and metrics",
      "REST edge rules",
      "Calling it",
    ];
    const files = [
      ...fs.readdirSync(path.join(root, "src"), { recursive: true, encoding: "utf8" }).map((f) => `src/${f}`),
      ...fs.readdirSync(path.join(root, "deploy"), { recursive: true, encoding: "utf8" }).map((f) => `deploy/${f}`),
      "Dockerfile",
      "compose.yaml",
      "test/docker/smoke.sh",
      "test/docker/fresh-machine.sh",
    ].filter((f) => fs.statSync(path.join(root, f)).isFile());
    const stale: string[] = [];
    for (const file of files) {
      const text = fs.readFileSync(path.join(root, file), "utf8").replace(/\s+/g, " ");
      for (const section of moved)
        for (const form of [`README "${section}"`, `README, ${section}`, `README's "${section}"`, `README.md, "${section}"`])
          if (text.includes(form)) stale.push(`${file}: ${form}`);
    }
    expect(stale).to.deep.equal([]);
  });
});
