import type { ServiceImpl } from "@connectrpc/connect";
import type { RService } from "../../../gen/es/rock/r/v1/rservice_pb.js";
import type { CommandEntry } from "../session/commands.js";
import type { REngine } from "../engine/engine.js";
import { noSuchCommand } from "../session/faults.js";
import { contentTypeOf } from "./negotiate.js";
import { commandMessage } from "./messages.js";
import type { RSession } from "../session/session.js";
import { SESSION_USERS, sessionFor } from "./permissions.js";

export type CommandHandlers = Pick<ServiceImpl<typeof RService>, "listCommands" | "getCommand" | "deleteCommand" | "getCommandResult">;

function commandOf(session: RSession, id: string): CommandEntry {
  session.touch();
  const command = session.commands.get(id);
  if (!command) throw noSuchCommand(id);
  return command;
}

/** @param waitMs upper bound of `wait=true` */
export function commandHandlers(engine: REngine, waitMs: number): CommandHandlers {
  return {
    async listCommands(req, ctx) {
      const session = sessionFor(engine, ctx, req.id, SESSION_USERS);
      session.touch();
      return { commands: session.commands.list().map(commandMessage) };
    },

    async getCommand(req, ctx) {
      const command = commandOf(sessionFor(engine, ctx, req.id, SESSION_USERS), req.cmdId);
      if (req.wait) await command.wait(waitMs);
      return { command: commandMessage(command) };
    },

    async deleteCommand(req, ctx) {
      const session = sessionFor(engine, ctx, req.id, SESSION_USERS);
      commandOf(session, req.cmdId);
      session.commands.remove(req.cmdId);
      return {};
    },

    async getCommandResult(req, ctx) {
      const session = sessionFor(engine, ctx, req.id, SESSION_USERS);
      const command = commandOf(session, req.cmdId);
      if (req.wait) await command.wait(waitMs);
      if (!command.finished) return {};
      if (req.rm ?? true) session.commands.remove(command.id);
      const { result, format } = command;
      if (result === undefined || format === undefined) return {};
      return { result: { contentType: contentTypeOf(format), data: result } };
    },
  };
}
