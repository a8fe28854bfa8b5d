import type { UniversalHandler } from "@connectrpc/connect/protocol";
import type { CallKernel } from "../call/call-kernel.js";
import type { RequestHandler, ServerRequest, ServerResponse } from "../http.js";
import type { Rest } from "../protocols/rest/rest.js";
import type { RouteTable } from "../protocols/rest/route-table.js";
import type { ConnectEs } from "../protocols/rpc/connect-es.js";
import type { FastUnary } from "../protocols/rpc/fast-unary.js";
import { answerUnknownMethod } from "../protocols/rpc/unknown-method.js";
import { isGrpcFamily, wireOf, type Wire } from "../protocols/rpc/wire.js";
import { MethodsAllowed, RouteTrie } from "./route-trie.js";

export interface FrontRouterOptions {
  /** Every RPC, in every protocol and kind of stream. */
  readonly connect: ConnectEs;
  /** The unary RPCs it serves; absent, Connect-ES serves them too (`server.unaryFastPath: false`). */
  readonly fastUnary: FastUnary | undefined;
  readonly rest: Rest;
  readonly restRoutes: RouteTable;
  /** Paths with a handler of their own (`/metrics`, `/openapi.json`, `/docs`): no RPC, no interceptor. */
  readonly resources: ReadonlyMap<string, RequestHandler>;
  /** Reports the unknown RPCs it answers. */
  readonly kernel: CallKernel;
}

export interface FrontRouter {
  readonly handle: RequestHandler;
  /**
   * Whether a request's body is a stream (a client stream, an upload), told from its method and path
   * before anything is read: such a body may take long to arrive.
   */
  streamsRequest(method: string, path: string): boolean;
}

/** Where an RPC's request path leads. */
interface Rpc {
  readonly connect: UniversalHandler;
  /** The unary fast path's serving of it, for a POST in a protocol it speaks. */
  readonly fast: ((req: ServerRequest, res: ServerResponse, wire: Wire) => void) | undefined;
  readonly streams: boolean;
}

/**
 * Where a request goes, decided once, by its path, method and content type, before any protocol
 * sees it (as vanguard-go classifies a request): an RPC's path goes to the unary fast path when it is
 * a POST in a protocol that path speaks, to Connect-ES otherwise; a gRPC or gRPC-Web call of a path
 * that is no RPC is answered UNIMPLEMENTED in its protocol; a resource's path goes to its handler;
 * everything else is REST, whose route (or the methods its path takes, for a 405) one walk of the
 * route trie finds.
 */
export function createFrontRouter(opts: FrontRouterOptions): FrontRouter {
  const rpcs = new Map<string, Rpc>();
  for (const [path, handler] of opts.connect.handlers) {
    const kind = handler.method.methodKind;
    rpcs.set(path, {
      connect: handler,
      fast: fastServing(opts.fastUnary, path),
      streams: kind === "client_streaming" || kind === "bidi_streaming",
    });
  }
  const { connect, rest, resources, kernel } = opts;
  // Built at start: two routes that would shadow each other refuse the start here.
  const routes = new RouteTrie(opts.restRoutes.routes);
  // The uploads alone: the listener asks of every request with a body, and this walk ends at once for the others.
  const uploads = new RouteTrie(opts.restRoutes.routes.filter((r) => r.spec.kind === "client_streaming"));

  return {
    handle(req, res) {
      const target = req.url ?? "/";
      const q = target.indexOf("?");
      const path = q < 0 ? target : target.slice(0, q);
      const contentType = req.headers["content-type"];
      const rpc = rpcs.get(path);
      if (rpc) {
        if (rpc.fast && req.method === "POST") {
          const wire = wireOf(contentType, req.httpVersionMajor);
          if (wire) return rpc.fast(req, res, wire);
        }
        return connect.serve(req, res, rpc.connect);
      }
      if (req.method === "POST" && isGrpcFamily(contentType)) {
        const wire = wireOf(contentType, req.httpVersionMajor);
        if (wire) return answerUnknownMethod(req, res, wire, kernel);
      }
      const resource = resources.get(path);
      if (resource) return resource(req, res);
      const parts = path.split("/").slice(1);
      const method = req.method ?? "GET";
      // HEAD is GET without the body (RFC 9110 §9.3.2), which every GET route answers so: the REST
      // edge stops at the headers. Armadillo probes the service with `HEAD /`.
      const found = routes.find(method === "HEAD" ? "GET" : method, parts);
      if (found instanceof MethodsAllowed) return rest.notAllowed(req, res, path, withHead(found.methods));
      if (!found) return rest.notFound(req, res, path);
      rest.serve(req, res, found, parts);
    },
    streamsRequest(method, path) {
      const rpc = rpcs.get(path);
      if (rpc) return rpc.streams;
      const upload = uploads.find(method, path.split("/").slice(1));
      return upload !== undefined && !(upload instanceof MethodsAllowed);
    },
  };
}

/** A 405's methods: HEAD beside GET, which takes it. */
function withHead(methods: readonly string[]): readonly string[] {
  const get = methods.indexOf("GET");
  return get < 0 ? methods : [...methods.slice(0, get + 1), "HEAD", ...methods.slice(get + 1)];
}

function fastServing(fastUnary: FastUnary | undefined, path: string): Rpc["fast"] {
  const method = fastUnary?.methods.get(path);
  if (!fastUnary || !method) return undefined;
  return (req, res, wire) => fastUnary.serve(req, res, method, wire);
}
