import { create } from "@bufbuild/protobuf";
import { CommandSchema, SessionSchema, type Command, type Session } from "../../../gen/es/rock/r/v1/rservice_pb.js";
import type { CommandInfo } from "../session/commands.js";
import type { SessionInfo } from "../session/life.js";

/** Session dates of the contract: `YYYY-MM-DD hh:mm:ss`, UTC. */
function sessionDate(date: Date): string {
  return date.toISOString().slice(0, 19).replace("T", " ");
}

/** Command dates of the contract: `YYYY-MM-DDThh:mm:ss.mmm+00:00`. */
function commandDate(date: Date): string {
  return date.toISOString().replace("Z", "+00:00");
}

export function sessionMessage(session: SessionInfo): Session {
  return create(SessionSchema, {
    id: session.id,
    subject: session.subject,
    busy: session.busy,
    suspended: session.suspended,
    createdDate: sessionDate(session.createdAt),
    lastAccessDate: sessionDate(session.lastAccess),
  });
}

export function commandMessage(command: CommandInfo): Command {
  return create(CommandSchema, {
    id: command.id,
    sessionId: command.sessionId,
    status: command.status,
    finished: command.finished,
    createdDate: commandDate(command.createdAt),
    startDate: command.startAt && commandDate(command.startAt),
    endDate: command.endAt && commandDate(command.endAt),
    withError: command.error !== undefined,
    error: command.error,
    withResult: command.result !== undefined,
    script: command.script,
  });
}
