import { expect } from "chai";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

const ROOT = path.resolve(import.meta.dirname, "../..");

/**
 * The layers, outside in: transport (src/listener, src/transport: front router → protocol adapters →
 * call kernel) → interceptors (src/interceptors) → services (src/r/service, src/networks/service:
 * proto ↔ domain) → domain (the rest of src/r and src/networks); src/server composes them (with
 * src/auth) and none of them imports it. Dependencies run that way only; a rule names the files it
 * binds and what they must not import.
 *
 * A pattern is a repository path (`src/server/`, `gen/`) or a package name (`@connectrpc/`); a pattern
 * ending in `/` covers everything under it, and `*` stands for one folder name.
 */
interface Rule {
  readonly name: string;
  readonly files: readonly string[];
  readonly except?: readonly string[];
  readonly mustNotImport: readonly string[];
}

const TRANSPORT = ["src/transport/", "src/listener/"];

const RULES: readonly Rule[] = [
  {
    name: "the domain knows nothing of proto, Connect, the transports, the interceptors, the server, auth or the services",
    files: ["src/r/", "src/networks/"],
    except: ["src/*/service/"],
    mustNotImport: ["gen/", "@bufbuild/", "@connectrpc/", ...TRANSPORT, "src/interceptors/", "src/server/", "src/auth/", "src/*/service/"],
  },
  {
    name: "the transports know nothing of the server that composes them, nor of auth",
    files: TRANSPORT,
    mustNotImport: ["src/server/", "src/auth/"],
  },
  {
    name: "the services know nothing of the transports, the interceptors or the server",
    files: ["src/*/service/"],
    mustNotImport: [...TRANSPORT, "src/interceptors/", "src/server/"],
  },
  {
    name: "the cluster wraps the services' handlers and knows nothing of the transports, the interceptors or the server",
    files: ["src/cluster/"],
    mustNotImport: [...TRANSPORT, "src/interceptors/", "src/server/", "src/auth/"],
  },
  {
    name: "the setup runs before anything serves: it knows no transport, interceptor, server or service",
    files: ["src/setup/"],
    mustNotImport: ["gen/", "@connectrpc/", ...TRANSPORT, "src/interceptors/", "src/server/", "src/*/service/"],
  },
  {
    name: "the domain is handed its configuration parsed: of src/config it reads the types alone",
    files: ["src/r/", "src/networks/"],
    mustNotImport: [
      "src/config/load.ts",
      "src/config/settings.ts",
      "src/config/r-settings.ts",
      "src/config/setting.ts",
      "src/config/kinds.ts",
      "src/config/users.ts",
      "src/config/rock.ts",
      "src/config/networks.ts",
      "src/config/secret-format.js",
    ],
  },
  {
    name: "REST is one protocol adapter beside the RPC protocols: it imports none of theirs",
    files: ["src/transport/protocols/rest/"],
    mustNotImport: ["src/transport/protocols/rpc/"],
  },
  {
    name: "the RPC protocols import nothing of REST's",
    files: ["src/transport/protocols/rpc/"],
    mustNotImport: ["src/transport/protocols/rest/"],
  },
  {
    name: "the protocol adapters know nothing of the front router that picks one of them",
    files: ["src/transport/protocols/"],
    mustNotImport: ["src/transport/router/"],
  },
  {
    name: "the call kernel knows nothing of the protocols that open calls with it, nor of the router",
    files: ["src/transport/call/"],
    mustNotImport: ["src/transport/protocols/", "src/transport/router/"],
  },
  {
    name: "the interceptors know nothing of the transports that run them, the server that composes them or the services they wrap",
    files: ["src/interceptors/"],
    mustNotImport: [...TRANSPORT, "src/server/", "src/*/service/"],
  },
];

/**
 * The R engine's folders, bottom up: each imports only the folders beneath it (src/README.md draws
 * them). `packages/` stands on `confine/` alone, beside the wire, the processes and the session.
 */
const R_FLOORS: readonly { readonly folder: string; readonly beneath: readonly string[] }[] = [
  { folder: "confine", beneath: [] },
  { folder: "wire", beneath: ["confine"] },
  { folder: "process", beneath: ["confine", "wire"] },
  { folder: "session", beneath: ["confine", "wire", "process"] },
  { folder: "packages", beneath: ["confine"] },
  { folder: "engine", beneath: ["confine", "wire", "process", "session", "packages"] },
  { folder: "service", beneath: ["confine", "wire", "process", "session", "packages", "engine"] },
];

const R_FLOOR_RULES: readonly Rule[] = R_FLOORS.map(({ folder, beneath }) => ({
  name: `src/r/${folder}/ imports of src/r only ${beneath.length > 0 ? beneath.map((f) => `${f}/`).join(", ") : "itself"}`,
  files: [`src/r/${folder}/`],
  mustNotImport: R_FLOORS.filter((f) => f.folder !== folder && !beneath.includes(f.folder)).map((f) => `src/r/${f.folder}/`),
}));

function matcher(patterns: readonly string[]): (target: string) => boolean {
  const regexes = patterns.map((p) => {
    const body = p.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replaceAll("*", "[^/]+");
    return new RegExp(`^${body}${p.endsWith("/") ? "" : "$"}`);
  });
  return (target) => regexes.some((r) => r.test(target));
}

/**
 * Every import of a source file (`import … from`, `export … from`, `import "…"`, `import("…")`), as a
 * repository path (`.js` specifiers named by their `.ts` file) or a package name.
 */
function importsOf(file: string, text: string, exists: (repoPath: string) => boolean): string[] {
  return ts.preProcessFile(text, true, true).importedFiles.map(({ fileName }) => {
    if (!fileName.startsWith(".")) return fileName;
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), fileName));
    const asTs = target.replace(/\.js$/, ".ts");
    return target !== asTs && exists(asTs) ? asTs : target;
  });
}

/** `<file> imports <target>` for each import a rule forbids. */
function offences(rule: Rule, sources: ReadonlyMap<string, string>, exists: (repoPath: string) => boolean): string[] {
  const bound = matcher(rule.files);
  const exempt = matcher(rule.except ?? []);
  const forbidden = matcher(rule.mustNotImport);
  const found: string[] = [];
  for (const [file, text] of sources) {
    if (!bound(file) || exempt(file)) continue;
    for (const target of importsOf(file, text, exists)) if (forbidden(target)) found.push(`${file} imports ${target}`);
  }
  return found;
}

/** Which of `sources` each one imports: the import graph of those files, packages and other files left out. */
function importGraph(sources: ReadonlyMap<string, string>, exists: (repoPath: string) => boolean): Map<string, string[]> {
  return new Map([...sources].map(([file, text]) => [file, importsOf(file, text, exists).filter((target) => sources.has(target))]));
}

/**
 * The import cycles of `graph`, each as `a → b → a`: one per group of files that reach each other
 * (Tarjan's strongly connected components), shown as the shortest loop through the group's first file,
 * since one loop named is enough to start untangling the group.
 */
function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const group: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      group.push(member);
    } while (member !== file);
    if (group.length > 1 || (graph.get(file) ?? []).includes(file)) groups.push(group.sort());
  };
  for (const file of [...graph.keys()].sort()) if (!index.has(file)) visit(file);
  return groups.sort((a, b) => a[0]!.localeCompare(b[0]!)).map((group) => shortestLoop(graph, new Set(group), group[0]!).join(" → "));
}

/** The shortest path from `start` back to itself through `members` (breadth first). */
function shortestLoop(graph: ReadonlyMap<string, readonly string[]>, members: ReadonlySet<string>, start: string): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const file = queue[i]!;
    for (const target of graph.get(file) ?? []) {
      if (target === start) {
        const between: string[] = [];
        for (let at = file; at !== start; at = cameFrom.get(at)!) between.unshift(at);
        return [start, ...between, start];
      }
      if (members.has(target) && !cameFrom.has(target)) {
        cameFrom.set(target, file);
        queue.push(target);
      }
    }
  }
  return [start];
}

/**
 * The import graph of the folders of src/ (its first level: src/auth, src/config, src/r, …), each folder
 * standing for every file under it; the files at src/'s top (main.ts, compose.ts) are no folder and left
 * out, and a folder's imports of itself are no edge.
 */
function folderGraph(graph: ReadonlyMap<string, readonly string[]>): Map<string, string[]> {
  const folder = (file: string): string | undefined => /^src\/[^/]+\//.exec(file)?.[0];
  const folders = new Map<string, Set<string>>();
  for (const [file, targets] of graph) {
    const from = folder(file);
    if (from === undefined) continue;
    const to = folders.get(from) ?? new Set<string>();
    folders.set(from, to);
    for (const target of targets) {
      const other = folder(target);
      if (other !== undefined && other !== from) to.add(other);
    }
  }
  return new Map([...folders].map(([from, to]) => [from, [...to].sort()]));
}

function sourceFiles(): Map<string, string> {
  const files = readdirSync(path.join(ROOT, "src"), { recursive: true, encoding: "utf8" })
    .filter((f) => /\.[cm]?[jt]s$/.test(f))
    .map((f) => path.posix.join("src", f.split(path.sep).join("/")))
    .sort();
  return new Map(files.map((f) => [f, readFileSync(path.join(ROOT, f), "utf8")]));
}

const onDisk = (repoPath: string): boolean => existsSync(path.join(ROOT, repoPath));

describe("layering: imports run transport → interceptors → services → domain", () => {
  const sources = sourceFiles();

  for (const rule of RULES) {
    it(rule.name, () => {
      const found = offences(rule, sources, onDisk);
      expect(found, rule.name).to.deep.equal([]);
    });
  }

  describe("the R engine's floors", () => {
    for (const rule of R_FLOOR_RULES) {
      it(rule.name, () => {
        expect(offences(rule, sources, onDisk), rule.name).to.deep.equal([]);
      });
    }

    it("src/r/ holds its floors' folders and the sandbox package, no file of its own", () => {
      const entries = readdirSync(path.join(ROOT, "src/r"), { withFileTypes: true });
      expect(
        entries.filter((e) => !e.isDirectory()).map((e) => e.name),
        "files at src/r/'s top",
      ).to.deep.equal([]);
      expect(entries.map((e) => e.name).sort(), "folders of src/r/").to.deep.equal([...R_FLOORS.map((f) => f.folder), "sandbox"].sort());
    });

    it("knows a floor importing one above it", () => {
      const planted = new Map([["src/r/wire/planted.ts", 'import type { RSession } from "../session/session.js";']]);
      const wire = R_FLOOR_RULES.find((r) => r.files[0] === "src/r/wire/")!;
      expect(offences(wire, planted, onDisk)).to.deep.equal(["src/r/wire/planted.ts imports src/r/session/session.ts"]);
    });
  });

  it("has no import cycle in src/, type-only imports included", () => {
    expect(importCycles(importGraph(sources, onDisk)), "import cycles").to.deep.equal([]);
  });

  it("has no import cycle between the folders of src/: of two folders, at most one imports the other", () => {
    expect(importCycles(folderGraph(importGraph(sources, onDisk))), "folder import cycles").to.deep.equal([]);
  });

  it("names each import cycle, however it is imported, and nothing else", () => {
    const planted = new Map([
      ["src/r/a.ts", 'import type { B } from "./b.js";'],
      ["src/r/b.ts", 'export { c } from "./c.js";\nimport "node:fs";'],
      ["src/r/c.ts", 'import { a } from "./a.js";\nimport { b } from "./b.js";'],
      ["src/r/d.ts", 'import { a } from "./a.js";\nconst later = () => import("./d.js");'],
      ["src/r/e.ts", 'import { d } from "./d.js";'],
    ]);
    expect(importCycles(importGraph(planted, (repoPath) => planted.has(repoPath)))).to.deep.equal([
      "src/r/a.ts → src/r/b.ts → src/r/c.ts → src/r/a.ts",
      "src/r/d.ts → src/r/d.ts",
    ]);
  });

  it("names a cycle between folders that no file cycle shows, and leaves out src/'s own files and a folder's imports of itself", () => {
    const planted = new Map([
      ["src/a/one.ts", 'import { two } from "../b/two.js";'],
      ["src/a/four.ts", 'import { one } from "./one.js";'],
      ["src/b/two.ts", 'import "node:fs";'],
      ["src/b/three.ts", 'import type { Four } from "../a/four.js";'],
      ["src/c/c.ts", 'import { main } from "../main.js";'],
      ["src/main.ts", 'import { c } from "./c/c.js";'],
    ]);
    const files = importGraph(planted, (repoPath) => planted.has(repoPath));
    expect(importCycles(files)).to.deep.equal(["src/c/c.ts → src/main.ts → src/c/c.ts"]);
    expect(importCycles(folderGraph(files))).to.deep.equal(["src/a/ → src/b/ → src/a/"]);
  });

  it("sees every kind of import and names what a rule forbids", () => {
    const planted = new Map([
      [
        "src/r/planted.ts",
        [
          'import type { Session } from "../../gen/es/rock/r/v1/rservice_pb.js";',
          'import {\n  create,\n} from "@bufbuild/protobuf";',
          'export { callerKey } from "../auth/caller.js";',
          'import "../server/app.js";',
          'const later = () => import("./service/handlers.js");',
          '// a comment naming from "../transport/protocols/rest/errors.js" is no import',
          'const text = "from \\"../transport/protocols/rpc/wire.js\\"";',
          'import { Channel } from "../channel.js";',
          'import { evalFrame } from "./protocol.js";',
        ].join("\n"),
      ],
      ["src/r/service/planted.ts", 'import { createRestHandler } from "../../transport/protocols/rest/rest.js";'],
      ["src/transport/planted.ts", 'import { responseMeterKey } from "../interceptors/response-meter.js";'],
    ]);
    const exists = () => true;
    expect(offences(RULES[0]!, planted, exists)).to.deep.equal([
      "src/r/planted.ts imports gen/es/rock/r/v1/rservice_pb.ts",
      "src/r/planted.ts imports @bufbuild/protobuf",
      "src/r/planted.ts imports src/auth/caller.ts",
      "src/r/planted.ts imports src/server/app.ts",
      "src/r/planted.ts imports src/r/service/handlers.ts",
    ]);
    expect(offences(RULES[2]!, planted, exists)).to.deep.equal(["src/r/service/planted.ts imports src/transport/protocols/rest/rest.ts"]);
    expect(offences(RULES[1]!, planted, exists)).to.deep.equal([]);
  });

  it("reads the real sources: the call kernel's import of the call observer's response meter is among them", () => {
    expect(sources.size).to.be.greaterThan(100);
    expect(importsOf("src/transport/call/call-kernel.ts", sources.get("src/transport/call/call-kernel.ts")!, onDisk)).to.include(
      "src/interceptors/response-meter.ts",
    );
  });
});

describe("the size of src/'s files", () => {
  it("has no source file of src/ over 400 lines (TypeScript, JavaScript, R, C)", () => {
    const long = readdirSync(path.join(ROOT, "src"), { recursive: true, encoding: "utf8" })
      .filter((f) => /\.([cm]?[jt]s|R|c|h)$/.test(f))
      .map((f) => ({ f, lines: readFileSync(path.join(ROOT, "src", f), "utf8").split("\n").length - 1 }))
      .filter(({ lines }) => lines > 400)
      .map(({ f, lines }) => `src/${f}: ${lines} lines`);
    expect(long, "files over 400 lines").to.deep.equal([]);
  });
});
