import type { DescMethod } from "@bufbuild/protobuf";
import type { PlainStatus } from "../transport/protocols/rest/rest-answer.js";
import type { Schema } from "./types.js";

/** The statuses a successful REST answer takes (the `rest_answer` option of its RPC). */
export type SuccessStatus = PlainStatus | 201;

/**
 * What a handler decides at run time and the protos cannot tell: when it gives each of its success
 * statuses (the statuses themselves are the `rest_answer` option's), the media types of its raw
 * (HttpBody) bodies, the response headers it sets, and error bodies of its own.
 */
export interface HandlerAnswers {
  /**
   * When each success status is given, if not always. A route that names `created` answers 201 when
   * the handler sets the fields the template reads, its `status` otherwise: that status is described
   * only when it has a text here, since only the handler knows whether it ever leaves them unset.
   */
  readonly when?: Readonly<Partial<Record<SuccessStatus, string>>>;
  /** Media types of the request's HttpBody; application/octet-stream when not given. */
  readonly requestMedia?: readonly string[];
  /** Media types of each HttpBody field of the answer, by proto field name; application/octet-stream when not given. */
  readonly responseMedia?: Readonly<Record<string, readonly string[]>>;
  readonly headers?: Readonly<Record<string, { readonly description: string; readonly schema: Schema }>>;
  readonly errors?: Readonly<Record<string, { readonly description: string; readonly schema: Schema }>>;
}

const JSON_OR_RDATA = ["application/json", "application/octet-stream"];

/** By RPC (`package.Service.Method`); each entry mirrors its handler (src/r/service, src/networks/service). */
const ANSWERS: Readonly<Record<string, HandlerAnswers>> = {
  "rock.r.v1.RService.AssignStream": {
    when: { 200: "Assigned (`async` false): no body.", 201: "`async=true`: the queued command." },
    requestMedia: ["application/x-rscript", "application/x-rdata", "application/octet-stream"],
  },
  "rock.r.v1.RService.EvalStream": {
    when: {
      200: "The value: JSON, or R serialization when `Accept` starts with application/octet-stream.",
      201: "`async=true`: the queued command.",
    },
    requestMedia: ["application/x-rscript"],
    responseMedia: { chunk: JSON_OR_RDATA },
  },
  "rock.r.v1.RService.Execute": { requestMedia: ["application/x-rscript"] },
  "rock.r.v1.RService.GetCommandResult": {
    when: {
      200: "The result, in the format the `Accept` header of its submission asked for.",
      204: "The command has not finished (and `wait` is false), or it has no result.",
    },
    responseMedia: { result: JSON_OR_RDATA },
  },
  "rock.r.v1.RService.GetLog": { responseMedia: { text: ["text/plain"] } },
  "rock.networks.v1.NetworkService.ListNetworks": {
    headers: { "X-Total-Count": { description: "Networks matching the query before paging.", schema: { type: "integer" } } },
  },
  "rock.networks.v1.NetworkService.DeleteNetwork": {
    errors: {
      "409": {
        description: "Other networks still include this one: their ids.",
        schema: { type: "object", properties: { network: { type: "array", items: { type: "string" } } }, required: ["network"] },
      },
    },
  },
  "rock.networks.v1.NetworkService.CreateShareKey": { responseMedia: { key: ["text/plain"] } },
};

export function rpcName(method: DescMethod): string {
  return `${method.parent.typeName}.${method.name}`;
}

export function handlerAnswers(method: DescMethod): HandlerAnswers {
  return ANSWERS[rpcName(method)] ?? {};
}

/** The RPCs described here, so a test can tell an entry left behind by a renamed RPC. */
export function describedRpcs(): readonly string[] {
  return Object.keys(ANSWERS);
}
