import { getOption, hasOption, type DescField, type DescMethod, type DescOneof } from "@bufbuild/protobuf";
import type { MethodImplSpec } from "@connectrpc/connect";
import { http as httpOption } from "../../../../gen/es/google/api/annotations_pb.js";
import type { HttpRule } from "../../../../gen/es/google/api/http_pb.js";
import { source as sourceOption } from "../../../../gen/es/rock/options/v1/access_pb.js";
import { parsePathTemplate, type PathTemplate } from "./path-template.js";
import { compileRestAnswer, type RestAnswerRule } from "./rest-answer.js";
import type { RegisteredService, RestStyle } from "../../service-registry.js";

/** One REST binding of an RPC, compiled from its google.api.http rule at start-up. */
export interface Route {
  readonly httpMethod: string;
  readonly template: PathTemplate;
  readonly spec: MethodImplSpec;
  readonly style: RestStyle;
  /** "" (no body), "*" (the whole request message) or a top-level field. */
  readonly bodyField: DescField | "*" | undefined;
  /** Where the answer comes from: the whole message, one field, or a oneof (whichever member is set). */
  readonly responseBody: DescField | DescOneof | undefined;
  /** Query parameter name (JSON name and proto name) → top-level field. */
  readonly queryFields: ReadonlyMap<string, DescField>;
  /** Fields filled from a request header when not set otherwise. */
  readonly headerFields: readonly (readonly [string, DescField])[];
  /** The status and Location of a unary answer, from the RPC's `rest_answer` option. */
  readonly answer: RestAnswerRule;
}

/** The REST routes of the services, compiled from their google.api.http annotations at start-up. */
export class RouteTable {
  readonly routes: readonly Route[];

  constructor(services: readonly RegisteredService[]) {
    const routes: Route[] = [];
    for (const svc of services) {
      const spec = svc.spec;
      for (const method of svc.desc.methods) {
        if (!hasOption(method, httpOption)) continue;
        const rule = getOption(method, httpOption);
        const answer = compileRestAnswer(method);
        for (const r of [rule, ...rule.additionalBindings])
          routes.push(compile(method, r, spec.methods[method.localName]!, svc.rest, answer));
      }
    }
    this.routes = routes;
  }
}

function compile(method: DescMethod, rule: HttpRule, spec: MethodImplSpec, style: RestStyle, answer: RestAnswerRule): Route {
  const p = rule.pattern;
  if (p.case === undefined || p.case === "custom") throw new Error(`${method.name}: unsupported http rule`);
  const template = parsePathTemplate(p.value);
  const input = method.input;
  const pathFields = new Set(template.segments.flatMap((s) => (s.kind === "var" ? [s.field.split(".")[0]!] : [])));

  let bodyField: DescField | "*" | undefined;
  if (rule.body === "*") bodyField = "*";
  else if (rule.body) bodyField = requireField(method, input.fields, rule.body);

  const queryFields = new Map<string, DescField>();
  const headerFields: [string, DescField][] = [];
  for (const f of input.fields) {
    if (hasOption(f, sourceOption)) headerFields.push([getOption(f, sourceOption).header, f]);
    if (pathFields.has(f.name) || bodyField === "*" || f === bodyField) continue;
    queryFields.set(f.jsonName, f);
    queryFields.set(f.name, f);
  }

  let responseBody: DescField | DescOneof | undefined;
  if (rule.responseBody) {
    responseBody =
      method.output.fields.find((f) => f.name === rule.responseBody) ?? method.output.oneofs.find((o) => o.name === rule.responseBody);
    if (!responseBody) throw new Error(`${method.name}: response_body '${rule.responseBody}' is neither a field nor a oneof`);
  }
  return { httpMethod: p.case.toUpperCase(), template, spec, style, bodyField, responseBody, queryFields, headerFields, answer };
}

function requireField(method: DescMethod, fields: readonly DescField[], name: string): DescField {
  const f = fields.find((x) => x.name === name);
  if (!f) throw new Error(`${method.name}: body field '${name}' not found`);
  return f;
}
