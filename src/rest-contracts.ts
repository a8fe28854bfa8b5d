import type { DescService } from "@bufbuild/protobuf";
import { NetworkService } from "../gen/es/rock/networks/v1/networks_pb.js";
import { RService } from "../gen/es/rock/r/v1/rservice_pb.js";
import type { RestStyle } from "./transport/service-registry.js";

/**
 * The services on the REST edge and the JSON style of each contract's answers. The server registers
 * its handlers with these styles (compose.ts) and `npm run gen` describes the same list
 * (gen/openapi.json), so the served and the committed API descriptions come from one route table.
 */
export const REST_CONTRACTS: readonly (readonly [DescService, RestStyle])[] = [
  // The R service's contract shows every field, defaults included.
  [RService, { alwaysEmitImplicit: true }],
  // The catalogue's contract shows only the fields that are set.
  [NetworkService, { alwaysEmitImplicit: false }],
];

export function restStyleOf(service: DescService): RestStyle {
  const found = REST_CONTRACTS.find(([s]) => s === service);
  if (!found) throw new Error(`${service.typeName} is not listed in src/rest-contracts.ts`);
  return found[1];
}
