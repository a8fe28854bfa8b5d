import { nodeTag } from "./session-ids.js";

/** Another node of the cluster, which calls for its sessions (or its catalogue) are passed on to. */
export interface Peer {
  readonly id: string;
  /** Base URL this node reaches it at (cleartext h2c, or https). */
  readonly url: string;
}

/** `id=url` entries (cluster.peers); the node's own entry may be listed, so that every node takes the same list. */
export function parsePeers(entries: readonly string[]): Peer[] {
  return entries.map((entry) => {
    const at = entry.indexOf("=");
    const id = entry.slice(0, at).trim();
    const url = entry
      .slice(at + 1)
      .trim()
      .replace(/\/+$/, "");
    if (at <= 0 || id === "" || !/^https?:\/\/[^/]+$/.test(url)) {
      throw new Error(`cluster.peers: expected id=http(s)://host:port entries, not '${entry}'`);
    }
    return { id, url };
  });
}

/** Who holds what: the peers by session tag, and the node that serves the catalogue. */
export class PeerTable {
  readonly selfTag: string;
  private readonly byTag = new Map<string, Peer>();
  private readonly catalog: Peer | undefined;

  constructor(
    readonly self: string,
    peers: readonly Peer[],
    catalogNode: string,
  ) {
    this.selfTag = nodeTag(self);
    for (const peer of peers) {
      if (peer.id === self) continue;
      const tag = nodeTag(peer.id);
      const other = tag === this.selfTag ? self : this.byTag.get(tag)?.id;
      // Two ids with one tag could not be told apart by their sessions' ids.
      if (other !== undefined && other !== peer.id)
        throw new Error(`cluster.peers: nodes '${other}' and '${peer.id}' have the same session tag ${tag}: rename one`);
      this.byTag.set(tag, peer);
    }
    if (catalogNode === "" || catalogNode === self) this.catalog = undefined;
    else {
      this.catalog = [...this.byTag.values()].find((p) => p.id === catalogNode);
      if (this.catalog === undefined) throw new Error(`cluster.catalogNode: '${catalogNode}' is not among cluster.peers`);
    }
  }

  /** The peer a session's calls go to; undefined: this node's own (or no node's). */
  holderOf(tag: string | undefined): Peer | undefined {
    return tag === undefined || tag === this.selfTag ? undefined : this.byTag.get(tag);
  }

  /** Every other node. */
  others(): Peer[] {
    return [...this.byTag.values()];
  }

  /** The peer serving the catalogue; undefined: this node. */
  catalogue(): Peer | undefined {
    return this.catalog;
  }
}
