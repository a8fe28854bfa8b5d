import type { DescMethod } from "@bufbuild/protobuf";
import type { Schema } from "./types.js";

/** One success answer of an RPC over REST. */
export interface SuccessAnswer {
  readonly status: 200 | 201 | 204;
  /** When it is given, if not always. */
  readonly when?: string;
  /** The member of a oneof `response_body` it carries; null when its response field is left unset (no body). */
  readonly member?: string | null;
}

/**
 * What a handler decides at run time and the route table cannot tell: the statuses it asks for
 * through rest-hints.ts (201 with a Location, 204), the media types of its raw (HttpBody) bodies,
 * the response headers it sets, and error bodies of its own.
 */
export interface HandlerAnswers {
  /** 200 with the route's answer when not given. */
  readonly success?: readonly SuccessAnswer[];
  /** Media types of the request's HttpBody; application/octet-stream when not given. */
  readonly requestMedia?: readonly string[];
  /** Media types of each HttpBody field of the answer, by proto field name; application/octet-stream when not given. */
  readonly responseMedia?: Readonly<Record<string, readonly string[]>>;
  readonly headers?: Readonly<Record<string, { readonly description: string; readonly schema: Schema }>>;
  readonly errors?: Readonly<Record<string, { readonly description: string; readonly schema: Schema }>>;
}

const JSON_OR_RDATA = ["application/json", "application/octet-stream"];
const NO_CONTENT: HandlerAnswers = { success: [{ status: 204 }] };
const CREATED: HandlerAnswers = { success: [{ status: 201 }] };

/** By RPC (`package.Service.Method`); each entry mirrors its handler (src/r/service, src/networks/service). */
const ANSWERS: Readonly<Record<string, HandlerAnswers>> = {
  "rock.r.v1.RService.CreateSession": CREATED,
  "rock.r.v1.RService.DeleteSessions": NO_CONTENT,
  "rock.r.v1.RService.DeleteSession": NO_CONTENT,
  "rock.r.v1.RService.Assign": {
    success: [
      { status: 200, member: null, when: "Assigned (`async` false): no body." },
      { status: 201, when: "`async=true`: the queued command." },
    ],
    requestMedia: ["application/x-rscript", "application/x-rdata"],
  },
  "rock.r.v1.RService.Eval": {
    success: [
      { status: 200, member: "value", when: "The value: JSON, or R serialization when `Accept` starts with application/octet-stream." },
      { status: 201, member: "command", when: "`async=true`: the queued command." },
    ],
    requestMedia: ["application/x-rscript"],
    responseMedia: { value: JSON_OR_RDATA },
  },
  "rock.r.v1.RService.Execute": { requestMedia: ["application/x-rscript"] },
  "rock.r.v1.RService.DeleteCommand": NO_CONTENT,
  "rock.r.v1.RService.GetCommandResult": {
    success: [
      { status: 200, when: "The result, in the format the `Accept` header of its submission asked for." },
      { status: 204, when: "The command has not finished (and `wait` is false), or it has no result." },
    ],
    responseMedia: { result: JSON_OR_RDATA },
  },
  "rock.r.v1.RService.GetLog": { responseMedia: { text: ["text/plain"] } },
  "rock.r.v1.RService.InstallPackage": NO_CONTENT,
  "rock.r.v1.RService.UpdatePackages": NO_CONTENT,
  "rock.r.v1.RService.RemovePackages": NO_CONTENT,
  "rock.r.v1.RService.RemovePackage": NO_CONTENT,
  "rock.networks.v1.NetworkService.ListNetworks": {
    headers: { "X-Total-Count": { description: "Networks matching the query before paging.", schema: { type: "integer" } } },
  },
  "rock.networks.v1.NetworkService.CreateNetwork": CREATED,
  "rock.networks.v1.NetworkService.RebuildIndex": NO_CONTENT,
  "rock.networks.v1.NetworkService.UpdateNetwork": NO_CONTENT,
  "rock.networks.v1.NetworkService.DeleteNetwork": {
    ...NO_CONTENT,
    errors: {
      "409": {
        description: "Other networks still include this one: their ids.",
        schema: { type: "object", properties: { network: { type: "array", items: { type: "string" } } }, required: ["network"] },
      },
    },
  },
  "rock.networks.v1.NetworkService.UpdateModel": NO_CONTENT,
  "rock.networks.v1.NetworkService.IndexNetwork": NO_CONTENT,
  "rock.networks.v1.NetworkService.SetStatus": NO_CONTENT,
  "rock.networks.v1.NetworkService.Publish": NO_CONTENT,
  "rock.networks.v1.NetworkService.Unpublish": NO_CONTENT,
  "rock.networks.v1.NetworkService.RestoreRevision": NO_CONTENT,
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
