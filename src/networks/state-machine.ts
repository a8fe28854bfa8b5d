import type { NetworkState, RevisionStatus } from "./model.js";

/** The table of reference §2.3, one function per row; `now` is an ISO timestamp. */

export function created(now: string): NetworkState {
  return { revisionStatus: "DRAFT", revisionsAhead: 1, head: 1, created: now, lastUpdate: now, lastTag: 0 };
}

/** Any save (update, model put, restore): one revision more, status and publication unchanged. */
export function saved(state: NetworkState, now: string): NetworkState {
  return { ...state, revisionsAhead: state.revisionsAhead + 1, head: state.head + 1, lastUpdate: now };
}

export function statusSet(state: NetworkState, status: RevisionStatus): NetworkState {
  return { ...state, revisionStatus: status };
}

export function published(state: NetworkState, now: string, by: string): NetworkState {
  const tag = state.lastTag + 1;
  return {
    ...state,
    revisionStatus: "DRAFT",
    revisionsAhead: 0,
    lastTag: tag,
    publishedTag: String(tag),
    publishedId: String(state.head),
    publicationDate: now,
    publishedBy: by,
  };
}

/** The table clears tag, date and author; `publishedId` keeps naming the last published revision. */
export function unpublished(state: NetworkState): NetworkState {
  const { publishedTag: _tag, publicationDate: _date, publishedBy: _by, ...rest } = state;
  return { ...rest, revisionStatus: state.revisionStatus === "DELETED" ? "DELETED" : "DRAFT", revisionsAhead: 0 };
}
