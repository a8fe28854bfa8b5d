import { expect } from "chai";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import type { ServiceImpl } from "@connectrpc/connect";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { registerService } from "../../src/edge/service-registry.js";
import { restStyleOf } from "../../src/rest-contracts.js";

const ROOT = path.resolve(import.meta.dirname, "../..");

/**
 * The layers, outside in: transport (src/listener, src/edge, src/rpc) → the server that composes
 * them, with its interceptors (src/server, src/auth) → services (src/r/service, src/networks/service:
 * proto ↔ domain) → domain (the rest of src/r and src/networks). Dependencies run that way only; a rule
 * names the files it binds and what they must not import.
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

const RULES: readonly Rule[] = [
  {
    name: "the domain knows nothing of proto, Connect, the transports, the server, auth or the services",
    files: ["src/r/", "src/networks/"],
    except: ["src/*/service/"],
    mustNotImport: ["gen/", "@bufbuild/", "@connectrpc/", "src/edge/", "src/rpc/", "src/listener/", "src/server/", "src/auth/", "src/*/service/"],
  },
  {
    name: "the transports know nothing of the server that composes them, nor of auth",
    files: ["src/edge/", "src/rpc/", "src/listener/"],
    mustNotImport: ["src/server/", "src/auth/"],
  },
  {
    name: "the services know nothing of the transports or the server",
    files: ["src/*/service/"],
    mustNotImport: ["src/edge/", "src/rpc/", "src/listener/", "src/server/"],
  },
  {
    name: "the cluster wraps the services' handlers and knows nothing of the transports or the server",
    files: ["src/cluster/"],
    mustNotImport: ["src/edge/", "src/rpc/", "src/listener/", "src/server/", "src/auth/"],
  },
  {
    name: "the setup runs before anything serves: it knows no transport, server or service",
    files: ["src/setup/"],
    mustNotImport: ["gen/", "@connectrpc/", "src/edge/", "src/rpc/", "src/listener/", "src/server/", "src/*/service/"],
  },
  {
    name: "the domain is handed its configuration parsed: of src/config it reads the types alone",
    files: ["src/r/", "src/networks/"],
    mustNotImport: ["src/config/load.ts", "src/config/settings.ts", "src/config/setting.ts", "src/config/kinds.ts", "src/config/users.ts", "src/config/rock.ts"],
  },
];

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

function sourceFiles(): Map<string, string> {
  const files = readdirSync(path.join(ROOT, "src"), { recursive: true, encoding: "utf8" })
    .filter((f) => /\.[cm]?[jt]s$/.test(f))
    .map((f) => path.posix.join("src", f.split(path.sep).join("/")))
    .sort();
  return new Map(files.map((f) => [f, readFileSync(path.join(ROOT, f), "utf8")]));
}

const onDisk = (repoPath: string): boolean => existsSync(path.join(ROOT, repoPath));

describe("layering: imports run transport → server → services → domain", () => {
  const sources = sourceFiles();

  for (const rule of RULES) {
    it(rule.name, () => {
      const found = offences(rule, sources, onDisk);
      expect(found, rule.name).to.deep.equal([]);
    });
  }

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
          '// a comment naming from "../edge/errors.js" is no import',
          'const text = "from \\"../rpc/wire.js\\"";',
          'import { Channel } from "../channel.js";',
          'import { evalFrame } from "./protocol.js";',
        ].join("\n"),
      ],
      ["src/r/service/planted.ts", 'import { createRestHandler } from "../../edge/rest-handler.js";'],
      ["src/edge/planted.ts", 'import { responseMeterKey } from "./response-meter.js";'],
    ]);
    const exists = () => true;
    expect(offences(RULES[0]!, planted, exists)).to.deep.equal([
      "src/r/planted.ts imports gen/es/rock/r/v1/rservice_pb.ts",
      "src/r/planted.ts imports @bufbuild/protobuf",
      "src/r/planted.ts imports src/auth/caller.ts",
      "src/r/planted.ts imports src/server/app.ts",
      "src/r/planted.ts imports src/r/service/handlers.ts",
    ]);
    expect(offences(RULES[2]!, planted, exists)).to.deep.equal(["src/r/service/planted.ts imports src/edge/rest-handler.ts"]);
    expect(offences(RULES[1]!, planted, exists)).to.deep.equal([]);
  });

  it("reads the real sources: the server's import of the transports' response meter is among them", () => {
    expect(sources.size).to.be.greaterThan(100);
    expect(importsOf("src/server/call-observer.ts", sources.get("src/server/call-observer.ts")!, onDisk)).to.include("src/edge/response-meter.ts");
  });
});

describe("service assembly", () => {
  it("does not type-check a service registered without one of its handlers (tsc runs over the tests)", () => {
    const partial: Omit<ServiceImpl<typeof RService>, "getSession"> = {} as Omit<ServiceImpl<typeof RService>, "getSession">;
    // @ts-expect-error getSession is missing: registered, it would answer UNIMPLEMENTED at run time
    const registered = registerService(RService, partial, restStyleOf(RService));
    expect(registered.desc).to.equal(RService);
  });
});
