import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { NetworkSchema, type NetworkService } from "../../../gen/es/rock/networks/v1/networks_pb.js";
import { parseBasic, unauthenticated } from "../../auth/basic.js";
import { callerKey, callerOf, hasAnyRole } from "../../auth/caller.js";
import { Fault } from "../../errors/fault.js";
import type { NetworkCatalog } from "../catalog.js";
import { excerpt } from "../limits.js";
import { isRevisionStatus, REVISION_STATUSES } from "../model.js";
import { CATALOG_ROLES, permissionsOf, VIEW_ONLY } from "./permissions.js";
import { networkInput, networkMessage, revisionMessage, summaryMessage } from "./messages.js";

/**
 * The NetworkService RPCs over a catalogue. Role rules per RPC are the auth interceptor's (proto
 * `access` options); these handlers add what depends on the document: empty lists without a
 * catalogue role, share keys, and the caller's permissions inside documents. A missing network is
 * NotFound whatever else is wrong with the request, hence the `catalog.get` before argument checks.
 */

function required(value: string, name: string): string {
  if (value === "") throw new Fault("invalid", `${name} is required`);
  return value;
}

export function createNetworkServiceHandlers(catalog: NetworkCatalog): ServiceImpl<typeof NetworkService> {
  return {
    listNetworks(req, ctx) {
      const caller = callerOf(ctx);
      if (!hasAnyRole(caller, CATALOG_ROLES)) {
        ctx.responseHeader.set("x-total-count", "0");
        return { networks: [], total: 0 };
      }
      const { page, total } = catalog.list({
        ...(req.study !== undefined ? { study: req.study } : {}),
        ...(req.query !== undefined ? { query: req.query } : {}),
        ...(req.from !== undefined ? { from: req.from } : {}),
        ...(req.limit !== undefined ? { limit: req.limit } : {}),
        ...(req.sort !== undefined ? { sort: req.sort } : {}),
        ...(req.order !== undefined ? { order: req.order } : {}),
        ...(req.filter !== undefined ? { filter: req.filter } : {}),
        exclude: req.exclude,
      });
      ctx.responseHeader.set("x-total-count", String(total));
      const p = permissionsOf(caller);
      return { networks: page.map((r) => summaryMessage(r, p)), total };
    },

    async createNetwork(req, ctx) {
      const caller = callerOf(ctx);
      const record = await catalog.create(networkInput(req.network ?? create(NetworkSchema)), caller.name, req.comment);
      return { network: networkMessage(record, permissionsOf(caller)) };
    },

    async rebuildIndex() {
      await catalog.rebuildIndex();
      return {};
    },

    // Public in the proto: a share key is a credential of its own (reference-behaviour §3), so this
    // handler is the one to require a catalogue role or a key that grants this id.
    getNetwork(req, ctx) {
      const caller = ctx.values.get(callerKey);
      // Permission first, existence second: a key holder learns nothing about other ids.
      if (caller && hasAnyRole(caller, CATALOG_ROLES)) return { network: networkMessage(catalog.get(req.id), permissionsOf(caller)) };
      // Wrong Basic credentials are refused as on any other call, not taken for an anonymous caller.
      if (!caller && parseBasic(ctx.requestHeader.get("authorization"))) throw unauthenticated("Bad credentials");
      if (!req.key || !catalog.shareKeyGrants(req.key, req.id)) {
        if (!caller) throw unauthenticated("Authentication required");
        throw new Fault("forbidden", `No permission to view network ${excerpt(req.id)}`);
      }
      return { network: networkMessage(catalog.get(req.id), VIEW_ONLY) };
    },

    async updateNetwork(req, ctx) {
      const caller = callerOf(ctx);
      catalog.get(req.id);
      if (!req.network) throw new Fault("invalid", "A network body is required");
      await catalog.update(req.id, networkInput(req.network), caller.name, req.comment);
      return {};
    },

    async deleteNetwork(req) {
      await catalog.delete(req.id);
      return {};
    },

    getModel(req) {
      return { model: catalog.get(req.id).document.model };
    },

    async updateModel(req, ctx) {
      const caller = callerOf(ctx);
      await catalog.updateModel(req.id, req.model ?? {}, caller.name, req.comment);
      return {};
    },

    async indexNetwork(req) {
      await catalog.indexNetwork(req.id);
      return {};
    },

    async setStatus(req) {
      catalog.get(req.id);
      if (!isRevisionStatus(req.value)) {
        throw new Fault("invalid", `value must be one of ${REVISION_STATUSES.join(", ")}`);
      }
      await catalog.setStatus(req.id, req.value);
      return {};
    },

    async publish(req, ctx) {
      await catalog.publish(req.id, callerOf(ctx).name);
      return {};
    },

    async unpublish(req) {
      await catalog.unpublish(req.id);
      return {};
    },

    async listRevisions(req) {
      return { revisions: (await catalog.revisions(req.id)).map(revisionMessage) };
    },

    async getRevision(req, ctx) {
      const { state } = catalog.get(req.id);
      const revision = await catalog.revision(req.id, req.commitId);
      return { network: networkMessage({ document: revision.document, state }, permissionsOf(callerOf(ctx)), revision.date) };
    },

    async restoreRevision(req, ctx) {
      await catalog.restore(req.id, req.commitId, callerOf(ctx).name, req.comment);
      return {};
    },

    async diffRevisions(req) {
      catalog.get(req.id);
      return { diff: await catalog.diff(req.id, required(req.left, "left"), required(req.right, "right")) };
    },

    createShareKey(req) {
      const key = catalog.shareKey(req.id, req.expire);
      return { key: { contentType: "text/plain", data: new TextEncoder().encode(key) } };
    },
  };
}
