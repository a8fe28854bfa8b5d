import type { DescMethod } from "@bufbuild/protobuf";
import packageJson from "../../package.json" with { type: "json" };
import type { PathTemplate } from "../transport/protocols/rest/path-template.js";
import type { RouteTable } from "../transport/protocols/rest/route-table.js";
import { BASIC_AUTH } from "./access.js";
import { ERROR_RESPONSES, ERROR_SCHEMA, ERROR_SCHEMA_NAME } from "./error-responses.js";
import { SchemaSet } from "./json-schema.js";
import { describeRoute } from "./operation.js";
import type { HttpMethod, OpenApiDocument, PathItem } from "./types.js";

const DESCRIPTION = `The REST paths of rock-ts. They are compiled at start from the \`google.api.http\` annotations of
its protos into the route table the REST edge serves, and this description is built from that same table.
The same RPCs answer gRPC, gRPC-Web and Connect on the same port.

Authentication is HTTP Basic; each operation says which roles it needs (any one of them). Errors have the
body \`{"status":"404","key":"not_found","args":[],"message":"…"}\`.`;

/** The OpenAPI 3.1 description of every route of the table, and of nothing else. */
export function buildOpenApi(table: RouteTable): OpenApiDocument {
  const schemas = new SchemaSet();
  const paths: Record<string, PathItem> = {};
  const bindings = new Map<DescMethod, number>();
  const services = new Map<string, string>();
  for (const route of table.routes) {
    const method = route.spec.method;
    // An RPC with additional bindings has one operation per binding.
    const n = (bindings.get(method) ?? 0) + 1;
    bindings.set(method, n);
    const operationId = `${method.parent.name}_${method.name}${n > 1 ? `_${n}` : ""}`;
    const path = openApiPath(route.template);
    const item = (paths[path] ??= {});
    const verb = route.httpMethod.toLowerCase() as HttpMethod;
    if (item[verb]) throw new Error(`two routes for ${route.httpMethod} ${route.template.source}`);
    item[verb] = describeRoute(route, schemas, operationId);
    services.set(method.parent.name, method.parent.typeName);
  }
  return {
    openapi: "3.1.0",
    info: { title: "rock-ts", version: packageJson.version, description: DESCRIPTION },
    tags: [...services].map(([name, typeName]) => ({ name, description: `gRPC service \`${typeName}\`.` })),
    paths,
    components: {
      schemas: { [ERROR_SCHEMA_NAME]: ERROR_SCHEMA, ...schemas.components() },
      responses: ERROR_RESPONSES,
      securitySchemes: {
        [BASIC_AUTH]: { type: "http", scheme: "basic", description: "User name and password of a configured user." },
      },
    },
  };
}

/** The document as served and as committed in gen/openapi.json. */
export function openApiText(doc: OpenApiDocument): string {
  return `${JSON.stringify(doc, null, 2)}\n`;
}

/** `{field}` and `{field=**}` both become `{field}`: OpenAPI has no multi-segment variables. */
function openApiPath(template: PathTemplate): string {
  return `/${template.segments.map((s) => (s.kind === "literal" ? s.text : `{${s.field}}`)).join("/")}`;
}
