import type { ServiceImpl } from "@connectrpc/connect";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { registerService } from "../../src/transport/service-registry.js";
import { restStyleOf } from "../../src/rest-contracts.js";

/*
 * Checked by `npm run typecheck` (tsc runs over test/), never run: mocha takes only *.test.ts. A service
 * registered without one of its handlers must not type-check, since it would answer UNIMPLEMENTED at run
 * time; were it accepted, the unused @ts-expect-error below would fail the type-check.
 */
declare const partial: Omit<ServiceImpl<typeof RService>, "getSession">;
// @ts-expect-error getSession is missing
registerService(RService, partial, restStyleOf(RService));
