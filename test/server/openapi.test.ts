import { expect } from "chai";
import fs from "node:fs";
import path from "node:path";
import { compileErrors, validate } from "@readme/openapi-parser";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { describedRouteTable } from "../../src/openapi/described.js";
import { describedRpcs, rpcName } from "../../src/openapi/handler-answers.js";
import type { HttpMethod, OpenApiDocument, Operation, Reference, Response } from "../../src/openapi/types.js";
import { rest, type RestAnswer, type RestOptions } from "../support/clients.js";
import { startTestServer, type TestServer } from "../support/server.js";

const COMMITTED = path.resolve(import.meta.dirname, "../../gen/openapi.json");
const PROTO = path.resolve(import.meta.dirname, "../../proto");
const committedText = fs.readFileSync(COMMITTED, "utf8");
const doc = JSON.parse(committedText) as OpenApiDocument;

/**
 * The `//` comment lines right above the line of `declaration` in a proto file, read from its source
 * text (not through the generator under test).
 */
function protoComment(file: string, declaration: RegExp): string {
  const lines = fs.readFileSync(path.join(PROTO, file), "utf8").split("\n");
  const at = lines.findIndex((l) => declaration.test(l));
  expect(at, `${declaration} in ${file}`).to.be.greaterThan(0);
  const comment: string[] = [];
  for (let i = at - 1; i >= 0 && /^\s*\/\//.test(lines[i]!); i--) comment.unshift(lines[i]!.replace(/^\s*\/\/ ?/, ""));
  return comment.join("\n");
}

/** JSON Pointer escaping (RFC 6901). */
const esc = (token: string) => token.replaceAll("~", "~0").replaceAll("/", "~1");

/** Every schema of the document (components, parameters, bodies, headers), by JSON Pointer. */
function schemaPointers(value: unknown, pointer = ""): string[] {
  if (typeof value !== "object" || value === null) return [];
  const entries = Object.entries(value as Record<string, unknown>);
  return entries.flatMap(([key, child]) => {
    const at = `${pointer}/${esc(key)}`;
    if (key === "schema" || pointer === "/components/schemas") return [at];
    return schemaPointers(child, at);
  });
}

/** Checks answers against the description: a documented status, media type, headers and body schema. */
class Conformance {
  private readonly ajv = new Ajv2020({
    strict: true,
    validateFormats: false,
    keywords: ["openapi", "info", "tags", "paths", "components"],
  });
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(private readonly document: OpenApiDocument) {
    this.ajv.addSchema({ ...document, $id: "openapi.json" });
  }

  schemaAt(pointer: string): ValidateFunction {
    let v = this.compiled.get(pointer);
    if (!v) this.compiled.set(pointer, (v = this.ajv.compile({ $ref: `openapi.json#${pointer}` })));
    return v;
  }

  check(method: string, template: string, res: RestAnswer): void {
    const where = `${method} ${template} → ${res.status}`;
    const op = this.document.paths[template]?.[method.toLowerCase() as HttpMethod];
    expect(op, `${method} ${template} is described`).to.not.equal(undefined);
    const key = String(res.status) in op!.responses ? String(res.status) : "default";
    expect(key === "default" && res.status < 400, `${where}: success statuses are listed one by one`).to.equal(false);
    const [response, base] = this.resolve(op!, template, method, key);
    for (const name of Object.keys(response.headers ?? {})) {
      if (name !== "Retry-After") expect(res.headers.has(name), `${where}: header ${name}`).to.equal(true);
    }
    const type = res.headers.get("content-type")?.split(";")[0]?.trim();
    if (res.bytes.length === 0) {
      expect(response.content, `${where}: documented without a body`).to.equal(undefined);
      return;
    }
    expect(Object.keys(response.content ?? {}), `${where}: media type`).to.include(type);
    const validate = (pointer: string, value: unknown) => {
      const v = this.schemaAt(pointer);
      expect(v(value), `${where}: ${JSON.stringify(v.errors)}`).to.equal(true);
    };
    const schema = `${base}/content/${esc(type!)}/schema`;
    if (type === "application/json") validate(schema, res.json());
    if (type === "application/x-ndjson") for (const line of res.text.trim().split("\n")) validate(schema, JSON.parse(line));
  }

  /** The response object and its JSON Pointer, through a `$ref` to a shared response. */
  private resolve(op: Operation, template: string, method: string, key: string): [Response, string] {
    const found = op.responses[key]!;
    if ("$ref" in found) {
      const name = (found as Reference).$ref.replace("#/components/responses/", "");
      return [this.document.components.responses[name]!, `/components/responses/${esc(name)}`];
    }
    return [found as Response, `/paths/${esc(template)}/${method.toLowerCase()}/responses/${key}`];
  }
}

describe("OpenAPI description", () => {
  it("is a valid OpenAPI 3.1 document", async () => {
    expect(doc.openapi).to.equal("3.1.0");
    // A fresh copy: the parser resolves references in place.
    const result = await validate(JSON.parse(committedText) as Parameters<typeof validate>[0]);
    expect(result.valid, result.valid ? "" : compileErrors(result)).to.equal(true);
    expect(result.warnings).to.deep.equal([]);
  });

  it("holds only valid JSON Schemas (Ajv, draft 2020-12, strict)", () => {
    const conformance = new Conformance(doc);
    const pointers = schemaPointers(doc);
    expect(pointers.length).to.be.greaterThan(100);
    for (const p of pointers) expect(() => conformance.schemaAt(p), p).to.not.throw();
  });

  it("describes every route of the table, and nothing else", () => {
    const routes = describedRouteTable().routes.map((r) => `${r.httpMethod} ${r.template.source.replace(/=\*\*?\}/g, "}")}`);
    const described = Object.entries(doc.paths).flatMap(([p, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${p}`));
    expect(described.sort()).to.deep.equal(routes.sort());
    expect(routes).to.include.members([
      "GET /_info",
      "POST /r/session/{id}/_eval",
      "GET /ws/draft/networks",
      "GET /rserver/packages/_datashield",
    ]);
  });

  it("describes the answers of existing RPCs only", () => {
    const rpcs = new Set(describedRouteTable().routes.map((r) => rpcName(r.spec.method)));
    expect(describedRpcs().filter((name) => !rpcs.has(name))).to.deep.equal([]);
  });

  it("gives each operation the security of its access option, roles as alternatives", () => {
    // Public: nothing required, Basic optional.
    expect(doc.paths["/_info"]!.get!.security).to.deep.equal([{}, { basicAuth: [] }]);
    expect(doc.paths["/_check"]!.get!.security).to.deep.equal([{}, { basicAuth: [] }]);
    expect(doc.paths["/_info"]!.get!.description).to.include("**Public**");
    expect(doc.paths["/r/sessions"]!.get!.security).to.deep.equal([{ basicAuth: [] }]);
    expect(doc.paths["/r/sessions"]!.post!.security).to.deep.equal([{ basicAuth: ["administrator"] }, { basicAuth: ["user"] }]);
    expect(doc.paths["/ws/draft/networks/_index"]!.put!.security).to.deep.equal([{ basicAuth: ["catalog-administrator"] }]);
    // The index rebuilds refuse a caller without the role 401, as their contract says, and never 403.
    for (const template of ["/ws/draft/networks/_index", "/ws/draft/network/{id}/_index"]) {
      const op = doc.paths[template]!.put!;
      expect(op.responses["401"], template).to.deep.equal({ $ref: "#/components/responses/UnauthenticatedOrNoRole" });
      expect(op.responses, template).to.not.have.property("403");
      expect(op.description, template).to.include("refused 401");
    }
    expect(doc.paths["/ws/draft/network/{id}/_publish"]!.put!.responses["403"]).to.deep.equal({
      $ref: "#/components/responses/PermissionDenied",
    });
    expect(doc.paths["/r/sessions"]!.post!.description).to.include("**Roles**: `administrator` or `user`.");
    expect(doc.components.securitySchemes.basicAuth).to.include({ type: "http", scheme: "basic" });
  });

  it("opens each operation's description with its RPC's proto comment, and describes fields by theirs", () => {
    const evalComment = protoComment("rock/r/v1/rservice.proto", /^\s*rpc EvalStream\(/);
    expect(evalComment).to.match(/^Evaluates an R script/);
    expect(doc.paths["/r/session/{id}/_eval"]!.post!.description.split("\n\n")[0]).to.equal(evalComment);
    const listComment = protoComment("rock/networks/v1/networks.proto", /^\s*rpc ListNetworks\(/);
    expect(listComment).to.match(/^Networks the caller may read/);
    expect(doc.paths["/ws/draft/networks"]!.get!.description.startsWith(`${listComment}\n\n**`)).to.equal(true);
    // An RPC without a comment keeps the generated notes alone.
    expect(protoComment("rock/r/v1/rservice.proto", /^\s*rpc ListSessions\(/)).to.equal("");
    expect(doc.paths["/r/sessions"]!.get!.description).to.match(/^\*\*Any authenticated user\*\*/);

    const created = protoComment("rock/r/v1/rservice.proto", /^\s*string created_date = 4;/);
    expect(created).to.equal("UTC, `YYYY-MM-DD hh:mm:ss`.");
    const session = doc.components.schemas["rock.r.v1.Session"] as { properties: Record<string, { description?: string }> };
    expect(session.properties.createdDate!.description).to.equal(created);
    const subject = doc.paths["/r/sessions"]!.get!.parameters!.find((p) => p.name === "subject");
    expect(subject!.description).to.equal(protoComment("rock/r/v1/rservice.proto", /^\s*optional string subject = 1;/));
  });

  it("types parameters and bodies as the edge reads them", () => {
    const assign = doc.paths["/r/session/{id}/_assign"]!.post!;
    const param = (op: Operation, name: string) => op.parameters?.find((p) => p.name === name);
    expect(param(assign, "s")).to.deep.include({ in: "query", description: "Also accepted as `symbol`." });
    expect(param(assign, "async")!.schema).to.deep.equal({ type: "string", enum: ["true", "false", "TRUE", "FALSE"] });
    expect(Object.keys(assign.requestBody!.content)).to.deep.equal([
      "application/x-rscript",
      "application/x-rdata",
      "application/octet-stream",
    ]);
    const list = doc.paths["/ws/draft/networks"]!.get!;
    expect(param(list, "exclude")).to.deep.include({ style: "form", explode: true, schema: { type: "array", items: { type: "string" } } });
    expect(param(list, "limit")!.schema).to.deep.equal({ type: "integer", format: "int32" });
    const upload = doc.paths["/r/session/{id}/_upload"]!.post!.requestBody!.content;
    expect(Object.keys(upload)).to.deep.equal(["multipart/form-data", "application/octet-stream"]);
    expect(doc.paths["/r/session/{id}/_execute"]!.post!.responses["200"]).to.have.nested.property("content.application/x-ndjson");
    expect(Object.keys((doc.paths["/r/session/{id}/_eval"]!.post!.responses["200"] as Response).content!)).to.deep.equal([
      "application/json",
      "application/octet-stream",
    ]);
  });
});

describe("OpenAPI description against the server", function () {
  this.timeout(60_000);
  let server: TestServer;
  const conformance = new Conformance(doc);
  const json = { "content-type": "application/json" };
  const rscript = { "content-type": "application/x-rscript" };

  before(async () => (server = await startTestServer({ r: { startOnBoot: true } })));
  after(() => server?.stop());

  it("is served at GET /openapi.json, without credentials, as committed", async () => {
    const res = await rest(server.url, "GET", "/openapi.json");
    expect(res.status).to.equal(200);
    expect(res.headers.get("content-type")).to.equal("application/json");
    expect(res.text).to.equal(committedText);
  });

  /** A REST call whose answer must be one the description gives for that operation. */
  async function call(method: string, template: string, p: string, o: RestOptions = {}): Promise<RestAnswer> {
    const res = await rest(server.url, method, p, o);
    conformance.check(method, template, res);
    return res;
  }

  it("describes what the catalogue answers", async () => {
    const as = (user: string, body?: string): RestOptions => ({ user, ...(body !== undefined ? { headers: json, body } : {}) });
    const network = JSON.stringify({ name: [{ lang: "en", value: "Open API" }], acronym: [{ lang: "en", value: "OA" }], studyIds: ["s1"] });
    expect((await call("POST", "/ws/draft/networks", "/ws/draft/networks", as("editor", network))).status).to.equal(201);
    await call("GET", "/ws/draft/networks", "/ws/draft/networks?exclude=x,y&limit=5", as("editor"));
    await call("GET", "/ws/draft/network/{id}", "/ws/draft/network/oa", as("editor"));
    await call("PUT", "/ws/draft/network/{id}", "/ws/draft/network/oa?comment=again", as("editor", network));
    await call("GET", "/ws/draft/network/{id}/model", "/ws/draft/network/oa/model", as("editor"));
    await call("PUT", "/ws/draft/network/{id}/_status", "/ws/draft/network/oa/_status?value=UNDER_REVIEW", as("reviewer"));
    await call("PUT", "/ws/draft/network/{id}/_publish", "/ws/draft/network/oa/_publish", as("reviewer"));
    const commits = await call("GET", "/ws/draft/network/{id}/commits", "/ws/draft/network/oa/commits", as("editor"));
    const commitId = commits.json<{ commitId: string }[]>()[0]!.commitId;
    await call("GET", "/ws/draft/network/{id}/commit/{commit_id}/view", `/ws/draft/network/oa/commit/${commitId}/view`, as("editor"));
    await call("PUT", "/ws/draft/network/{id}/_share_key", "/ws/draft/network/oa/_share_key?expire=2999-01-01", as("editor"));
    expect((await call("GET", "/ws/draft/network/{id}", "/ws/draft/network/missing", as("editor"))).status).to.equal(404);
    expect((await call("GET", "/ws/draft/networks", "/ws/draft/networks", { user: "editor", password: "wrong" })).status).to.equal(401);
    expect((await call("POST", "/ws/draft/networks", "/ws/draft/networks", as("nobody", network))).status).to.equal(403);
    expect((await call("PUT", "/ws/draft/network/{id}/_index", "/ws/draft/network/oa/_index", as("cadmin"))).status).to.equal(204);
    expect((await call("PUT", "/ws/draft/networks/_index", "/ws/draft/networks/_index", as("cadmin"))).status).to.equal(200);
    expect((await call("PUT", "/ws/draft/networks/_index", "/ws/draft/networks/_index", as("reviewer"))).status).to.equal(401);
    await call("DELETE", "/ws/draft/network/{id}/_publish", "/ws/draft/network/oa/_publish", as("reviewer"));
    await call("DELETE", "/ws/draft/network/{id}", "/ws/draft/network/oa", as("reviewer"));
  });

  it("describes what the R service answers", async () => {
    const admin = (o: RestOptions = {}): RestOptions => ({ user: "admin", ...o });
    await call("GET", "/_info", "/_info");
    await call("GET", "/", "/");
    await call("GET", "/_check", "/_check");
    const created = await call("POST", "/r/sessions", "/r/sessions", admin());
    expect(created.status).to.equal(201);
    const id = created.json<{ id: string }>().id;
    const s = `/r/session/${id}`;
    await call("GET", "/r/sessions", "/r/sessions", admin());
    await call("GET", "/r/session/{id}", s, admin());
    await call("POST", "/r/session/{id}/_eval", `${s}/_eval`, admin({ headers: rscript, body: "list(a = 1, b = 'x')" }));
    await call(
      "POST",
      "/r/session/{id}/_eval",
      `${s}/_eval`,
      admin({ headers: { ...rscript, accept: "application/octet-stream" }, body: "1:3" }),
    );
    await call("POST", "/r/session/{id}/_assign", `${s}/_assign?s=x`, admin({ headers: rscript, body: "42" }));
    const queued = await call("POST", "/r/session/{id}/_eval", `${s}/_eval?async=TRUE`, admin({ headers: rscript, body: "x + 1" }));
    expect(queued.status).to.equal(201);
    const cmd = queued.json<{ id: string }>().id;
    await call("GET", "/r/session/{id}/command/{cmd_id}", `${s}/command/${cmd}?wait=true`, admin());
    await call("GET", "/r/session/{id}/commands", `${s}/commands`, admin());
    await call("GET", "/r/session/{id}/command/{cmd_id}/result", `${s}/command/${cmd}/result?wait=TRUE`, admin());
    await call("POST", "/r/session/{id}/_execute", `${s}/_execute`, admin({ headers: rscript, body: "print('hi'); warning('w'); 7" }));
    const boundary = "openapi-test";
    const form = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nhello\r\n--${boundary}--\r\n`;
    await call(
      "POST",
      "/r/session/{id}/_upload",
      `${s}/_upload`,
      admin({ headers: { "content-type": `multipart/form-data; boundary=${boundary}` }, body: form }),
    );
    await call("GET", "/r/session/{id}/_download", `${s}/_download?path=a.txt`, admin());
    await call("POST", "/r/session/{id}/_interrupt", `${s}/_interrupt`, admin());
    await call("GET", "/rserver", "/rserver", admin());
    await call("GET", "/rserver/_version", "/rserver/_version", admin());
    await call("GET", "/rserver/_log", "/rserver/_log?limit=3", admin());
    await call("GET", "/rserver/_tail", "/rserver/_tail?limit=3", admin());
    await call("GET", "/r/session/{id}", "/r/session/missing", admin());
    await call("DELETE", "/r/session/{id}", s, admin());
  });
});
