import { isMessage, type DescMethod, type Message } from "@bufbuild/protobuf";
import { NetworkService } from "../../gen/es/rock/networks/v1/networks_pb.js";
import { ListSessionsResponseSchema, RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import type { CallRoute, FanOut } from "./forwarding.js";
import type { PeerTable } from "./peers.js";
import { tagOf } from "./session-ids.js";

const namesSession = new WeakMap<DescMethod, boolean>();

/** RService methods whose request names a session (`id`): they are served where the session lives. */
function sessionScoped(method: DescMethod): boolean {
  let scoped = namesSession.get(method);
  if (scoped === undefined) {
    scoped = method.parent.typeName === RService.typeName && method.input.fields.some((f) => f.name === "id");
    namesSession.set(method, scoped);
  }
  return scoped;
}

/** Where each call goes: a session's calls to the node its id names, the catalogue's to its node. */
export function clusterRoute(table: PeerTable): CallRoute {
  return (method, message) => {
    if (method.parent.typeName === NetworkService.typeName) {
      const peer = table.catalogue();
      return peer && { peer, what: "The catalogue" };
    }
    if (!sessionScoped(method) || typeof message !== "object" || message === null || !("id" in message)) return undefined;
    const id = message.id;
    if (typeof id !== "string") return undefined;
    const peer = table.holderOf(tagOf(id));
    return peer && { peer, what: `R session ${id}` };
  };
}

/**
 * The calls about every session: the list (rockr lists sessions through the same address it opened one
 * at) is every node's list, closing them all closes every node's.
 */
export const clusterFanOut: FanOut = (method) => {
  if (method.parent.typeName !== RService.typeName) return undefined;
  if (method.name === "ListSessions") {
    return (answers: Message[]) => ({ sessions: answers.flatMap((a) => (isMessage(a, ListSessionsResponseSchema) ? a.sessions : [])) });
  }
  if (method.name === "DeleteSessions") return (answers: Message[]) => answers[0] ?? {};
  return undefined;
};
