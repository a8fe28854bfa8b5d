import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  type EntityStateSchema,
  type LocalizedStringSchema,
  type LogoSchema,
  NetworkSchema,
  NetworkSummarySchema,
  type PermissionsSchema,
  RevisionSchema,
  type LocalizedString,
  type Logo,
  type Network,
  type NetworkSummary,
  type Revision,
} from "../../../gen/es/rock/networks/v1/networks_pb.js";
import type { RevisionInfo } from "../catalog.js";
import { parseContent } from "../document.js";
import type { LocalizedText, LogoDoc, NetworkInput, NetworkRecord, NetworkState } from "../model.js";
import type { DocumentPermissions } from "./permissions.js";

/**
 * Domain records ↔ protobuf messages, shaped for reference §2.1: the REST edge emits only set fields,
 * so a field is set here exactly when it must appear.
 */

function localized(list: readonly LocalizedText[]): MessageInitShape<typeof LocalizedStringSchema>[] {
  return list.map((l) => ({ lang: l.lang, value: l.value }));
}

function permissions(p: DocumentPermissions): MessageInitShape<typeof PermissionsSchema> {
  return { view: p.view, edit: p.edit, delete: p.delete, publish: p.publish };
}

function entityState(state: NetworkState, p: DocumentPermissions): MessageInitShape<typeof EntityStateSchema> {
  return {
    revisionsAhead: state.revisionsAhead,
    revisionStatus: state.revisionStatus,
    publishedTag: state.publishedTag,
    publicationDate: state.publicationDate,
    publishedBy: state.publishedBy,
    publishedId: state.publishedId,
    permissions: permissions(p),
  };
}

/** The logo fields a document and a message share, by the same names. */
const LOGO_FIELDS = ["id", "fileName", "type", "lang", "size", "md5"] as const;

/** The fields of `from` that are set; a document stored as JSON keeps no key of an absent field, so documents compare by content. */
function setLogoFields(from: Pick<LogoDoc, (typeof LOGO_FIELDS)[number]>): Pick<LogoDoc, (typeof LOGO_FIELDS)[number]> {
  return Object.fromEntries(LOGO_FIELDS.flatMap((k) => (from[k] === undefined ? [] : [[k, from[k]]])));
}

function logo(l: LogoDoc): MessageInitShape<typeof LogoSchema> {
  return { ...setLogoFields(l), ...(l.created !== undefined ? { timestamps: { created: l.created } } : {}) };
}

/** `lastUpdate` may be overridden to show a revision's date. */
export function networkMessage(record: NetworkRecord, p: DocumentPermissions, lastUpdate = record.state.lastUpdate): Network {
  const { document: doc, state } = record;
  return create(NetworkSchema, {
    id: doc.id,
    name: localized(doc.name),
    acronym: localized(doc.acronym),
    description: localized(doc.description),
    content: JSON.stringify(doc.model),
    studyIds: [...doc.studyIds],
    studySummaries: [...doc.studySummaries],
    memberships: [...doc.memberships],
    networkIds: [...doc.networkIds],
    ...(doc.logo ? { logo: logo(doc.logo) } : {}),
    permissions: permissions(p),
    published: state.publishedTag !== undefined,
    timestamps: { created: state.created, lastUpdate },
    state: entityState(state, p),
  });
}

export function summaryMessage(record: NetworkRecord, p: DocumentPermissions): NetworkSummary {
  const { document: doc, state } = record;
  return create(NetworkSummarySchema, {
    id: doc.id,
    timestamps: { created: state.created, lastUpdate: state.lastUpdate },
    name: localized(doc.name),
    acronym: localized(doc.acronym),
    published: state.publishedTag !== undefined,
    studyIds: [...doc.studyIds],
    permissions: permissions(p),
    state: entityState(state, p),
  });
}

function inputLocalized(list: readonly LocalizedString[]): LocalizedText[] {
  return list.map((l) => ({ lang: l.lang ?? "", value: l.value ?? "" }));
}

function inputLogo(l: Logo): LogoDoc {
  const created = l.timestamps?.created;
  return { ...setLogoFields(l), ...(created !== undefined ? { created } : {}) };
}

/** What the editor controls; permissions, timestamps, state and `published` are the server's. */
export function networkInput(msg: Network): NetworkInput {
  return {
    ...(msg.id ? { id: msg.id } : {}),
    name: inputLocalized(msg.name),
    acronym: inputLocalized(msg.acronym),
    description: inputLocalized(msg.description),
    model: parseContent(msg.content),
    studyIds: msg.studyIds,
    studySummaries: msg.studySummaries,
    memberships: msg.memberships,
    networkIds: msg.networkIds,
    ...(msg.logo ? { logo: inputLogo(msg.logo) } : {}),
  };
}

export function revisionMessage(info: RevisionInfo): Revision {
  return create(RevisionSchema, {
    commitId: info.commitId,
    author: info.revision.author,
    date: info.revision.date,
    comment: info.revision.comment,
    isHead: info.isHead,
    isPublished: info.isPublished,
  });
}
