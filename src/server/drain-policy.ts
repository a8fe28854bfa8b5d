import type { DescMethod } from "@bufbuild/protobuf";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { Fault, retryLater } from "../errors/fault.js";
import type { DrainPolicy } from "../interceptors/drain-gate.js";
import { Health } from "./health.js";
import { ReflectionV1, ReflectionV1Alpha } from "./reflection.js";

const PROBES: ReadonlySet<string> = new Set([Health, ReflectionV1, ReflectionV1Alpha].map((s) => s.typeName));

/** Health and reflection: they tell clients what happens, and `buf curl` needs reflection to ask health. */
function isProbe(method: DescMethod): boolean {
  return PROBES.has(method.parent.typeName);
}

/**
 * An RService call on one session names it in its request's `id` (REST `/r/session/{id}/…`): a client
 * with a session may finish its work there (evaluate, fetch results and files, close it) while the
 * service drains. A new session, the R server, packages and the catalogue answer 503.
 */
function onSession(method: DescMethod): boolean {
  return method.parent.typeName === RService.typeName && method.input.fields.some((f) => f.name === "id");
}

export const drainPolicy: DrainPolicy = {
  // `/_info` lists 200 and 500 only (r-execution-service §4), and what it tells stays true while the
  // service stops: discovery clients still learn what answers there.
  admits: (method) => isProbe(method) || onSession(method) || method === RService.method.getInfo,
  // A followed log tail ends only when its caller leaves.
  endless: (method) => isProbe(method) || method === RService.method.tailLog,
  // `/_check` answers 200 or 500 (reference-behaviour §1.5, a Decision): a stopping service is not
  // functional, and a load balancer needs no Retry-After to take it out.
  refusal: (method) =>
    method === RService.method.check ? new Fault("internal", "The service is stopping") : retryLater("The service is stopping"),
};
