import { createHash, randomUUID } from "node:crypto";

/**
 * A session id names the node that holds it: its first 8 hex digits are the node's tag, the rest is
 * a random UUID's (90 random bits). It stays a UUID in form, and a load balancer can route a session's
 * REST calls by a path prefix (`/r/session/<tag>`), a node pass a call on to the peer with that tag.
 */
export function nodeTag(nodeId: string): string {
  return createHash("sha256").update(nodeId).digest("hex").slice(0, 8);
}

export function taggedSessionId(tag: string): string {
  return tag + randomUUID().slice(8);
}

/** The tag of a session id, undefined when it has none (not an id this server made). */
export function tagOf(sessionId: string): string | undefined {
  return /^[0-9a-f]{8}-/.test(sessionId) ? sessionId.slice(0, 8) : undefined;
}
