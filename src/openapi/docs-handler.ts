import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { Code } from "@connectrpc/connect";
import { restError, type RestError } from "../transport/protocols/rest/errors.js";
import { openApiText } from "./document.js";
import { DOCS_CSP, DOCS_HTML, DOCS_SCRIPT } from "./docs-page.js";
import type { OpenApiDocument } from "./types.js";
import type { RequestHandler, ServerRequest, ServerResponse } from "../transport/http.js";

interface Served {
  readonly headers: Record<string, string>;
  readonly body: Buffer;
}

const JS = "text/javascript; charset=utf-8";
const SWAGGER_UI_DIR = path.dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
/** The files of swagger-ui-dist the page loads: a fixed list, so no request path ever reaches the file system. */
const SWAGGER_UI_FILES: Readonly<Record<string, string>> = {
  "swagger-ui-bundle.js": JS,
  "swagger-ui.css": "text/css; charset=utf-8",
  "favicon-32x32.png": "image/png",
};

/**
 * GET /openapi.json, the /docs page and its assets, by path. Public: they describe the API and call
 * nothing; the page's "try it out" calls go through the REST edge like any other.
 */
export function apiDocs(document: OpenApiDocument): ReadonlyMap<string, RequestHandler> {
  return new Map([
    ["/openapi.json", file(async () => served("application/json", Buffer.from(openApiText(document))))],
    ["/docs", file(async () => served("text/html; charset=utf-8", Buffer.from(DOCS_HTML), { "content-security-policy": DOCS_CSP }))],
    ["/docs/assets/docs.js", file(async () => served(JS, Buffer.from(DOCS_SCRIPT)))],
    ...Object.entries(SWAGGER_UI_FILES).map(([name, type]): [string, RequestHandler] => [
      `/docs/assets/${name}`,
      file(async () => served(type, await fs.readFile(path.join(SWAGGER_UI_DIR, name)))),
    ]),
  ]);
}

/** Serves what `load` gives, loaded on first use. */
function file(load: () => Promise<Served>): RequestHandler {
  const loaded = once(load);
  return (req, res) => serveFile(req, res, loaded);
}

function serveFile(req: ServerRequest, res: ServerResponse, load: () => Promise<Served>): void {
  if (req.method !== "GET" && req.method !== "HEAD") {
    return send(res, restError(Code.Unimplemented, `Method ${req.method} is not allowed here`, 405), { allow: "GET, HEAD" });
  }
  load().then(
    (file) => {
      const fresh = req.headers["if-none-match"] === file.headers.etag;
      res.writeHead(fresh ? 304 : 200, file.headers);
      if (fresh || req.method === "HEAD") res.end();
      else res.end(file.body);
    },
    () => send(res, restError(Code.Internal, "Internal error")),
  );
}

function served(contentType: string, body: Buffer, extra: Record<string, string> = {}): Served {
  const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`;
  const headers = {
    "content-type": contentType,
    "content-length": String(body.length),
    etag,
    // Revalidated on each load: a changed description or an upgraded swagger-ui-dist shows at once.
    "cache-control": "no-cache",
    "x-content-type-options": "nosniff",
    ...extra,
  };
  return { headers, body };
}

/** Loads on first use and keeps the result; a failed load is tried again next time. */
function once(load: () => Promise<Served>): () => Promise<Served> {
  let pending: Promise<Served> | undefined;
  return () => {
    pending ??= load().catch((e: unknown) => {
      pending = undefined;
      throw e;
    });
    return pending;
  };
}

function send(res: ServerResponse, e: RestError, extra: Record<string, string> = {}): void {
  res.writeHead(e.status, { ...e.headers, ...extra, "content-length": String(Buffer.byteLength(e.body)) });
  res.end(e.body);
}
