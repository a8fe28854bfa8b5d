/** Internal (storage) shapes of the catalogue; the shapes clients see are mapped to messages in service/messages.ts. */

/**
 * A JSON value as documents hold it (the model, study summaries, memberships). The same shape as
 * protobuf-es's JsonValue, so the service hands it to and from `google.protobuf.Struct` fields as is.
 */
export type JsonValue = number | string | boolean | null | JsonObject | JsonValue[];
export type JsonObject = { [key: string]: JsonValue };

export interface LocalizedText {
  readonly lang: string;
  readonly value: string;
}

export interface LogoDoc {
  readonly id?: string;
  readonly fileName?: string;
  readonly type?: string;
  readonly lang?: string;
  readonly size?: number;
  readonly md5?: string;
  readonly created?: string;
}

/** What a revision saves: everything the editor controls, nothing the server manages. */
export interface NetworkDocument {
  readonly id: string;
  readonly name: readonly LocalizedText[];
  readonly acronym: readonly LocalizedText[];
  readonly description: readonly LocalizedText[];
  readonly model: JsonObject;
  readonly studyIds: readonly string[];
  readonly studySummaries: readonly JsonObject[];
  readonly memberships: readonly JsonObject[];
  readonly networkIds: readonly string[];
  readonly logo?: LogoDoc;
}

/** A document as submitted: the id may be absent (then derived) and lists may be missing. */
export type NetworkInput = Partial<NetworkDocument>;

export const REVISION_STATUSES = ["DRAFT", "UNDER_REVIEW", "DELETED"] as const;
export type RevisionStatus = (typeof REVISION_STATUSES)[number];

export function isRevisionStatus(value: string): value is RevisionStatus {
  return (REVISION_STATUSES as readonly string[]).includes(value);
}

/** Server-managed state of one network. `head` is the sequence number of its newest revision. */
export interface NetworkState {
  readonly revisionStatus: RevisionStatus;
  readonly revisionsAhead: number;
  readonly head: number;
  readonly created: string;
  readonly lastUpdate: string;
  /** Highest tag ever given, kept through unpublish so that tags are never reused. */
  readonly lastTag: number;
  readonly publishedTag?: string;
  readonly publishedId?: string;
  readonly publicationDate?: string;
  readonly publishedBy?: string;
}

export interface RevisionRecord {
  readonly seq: number;
  readonly author: string;
  readonly date: string;
  readonly comment?: string;
  readonly document: NetworkDocument;
}

/** The current draft of a network as kept in the store and its in-memory mirror. */
export interface NetworkRecord {
  readonly document: NetworkDocument;
  readonly state: NetworkState;
}
