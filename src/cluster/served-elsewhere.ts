import type { ServiceImpl } from "@connectrpc/connect";
import type { NetworkService } from "../../gen/es/rock/networks/v1/networks_pb.js";
import { Fault } from "../errors/fault.js";

/**
 * The catalogue's handlers on a node that does not serve it (cluster.catalogNode names another): its
 * routes exist here, every call is passed on to that node by the forwarding interceptor before it
 * reaches them, and one that arrives anyway (passed on once already, by a node configured otherwise)
 * is told where the catalogue is.
 */
export function catalogueServedElsewhere(node: string): ServiceImpl<typeof NetworkService> {
  const refuse = (): never => {
    throw new Fault("unavailable", `The catalogue is served by node ${node} (cluster.catalogNode), not by this one`);
  };
  return {
    listNetworks: refuse,
    createNetwork: refuse,
    rebuildIndex: refuse,
    getNetwork: refuse,
    updateNetwork: refuse,
    deleteNetwork: refuse,
    getModel: refuse,
    updateModel: refuse,
    indexNetwork: refuse,
    setStatus: refuse,
    publish: refuse,
    unpublish: refuse,
    listRevisions: refuse,
    getRevision: refuse,
    restoreRevision: refuse,
    diffRevisions: refuse,
    createShareKey: refuse,
  };
}
