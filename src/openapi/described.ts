import { createServiceImplSpec } from "@connectrpc/connect";
import { RouteTable } from "../transport/protocols/rest/route-table.js";
import { REST_CONTRACTS } from "../rest-contracts.js";
import { buildOpenApi, openApiText } from "./document.js";

/**
 * The route table of the REST contracts without their handlers, which a description does not need:
 * what `npm run gen` writes to gen/openapi.json, equal to what the server serves at /openapi.json.
 */
export function describedRouteTable(): RouteTable {
  return new RouteTable(REST_CONTRACTS.map(([desc, rest]) => ({ desc, spec: createServiceImplSpec(desc, {}), rest })));
}

export function describedApiText(): string {
  return openApiText(buildOpenApi(describedRouteTable()));
}
