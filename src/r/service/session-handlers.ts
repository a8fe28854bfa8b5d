import { fromJson, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { HttpBody } from "../../../gen/es/google/api/httpbody_pb.js";
import type { ExecuteResponseSchema, RService } from "../../../gen/es/rock/r/v1/rservice_pb.js";
import { callerOf, hasAnyRole } from "../../auth/caller.js";
import { Channel } from "../../channel.js";
import { Fault } from "../../errors/fault.js";
import type { EvalEvent } from "../child.js";
import type { REngine } from "../engine.js";
import { contentTypeOf, negotiate } from "./negotiate.js";
import { commandMessage, sessionMessage } from "./messages.js";
import type { AssignSource } from "../protocol.js";
import { SESSION_READERS, SESSION_USERS, sessionFor } from "./permissions.js";

export type SessionHandlers = Pick<
  ServiceImpl<typeof RService>,
  | "listSessions"
  | "createSession"
  | "deleteSessions"
  | "getSession"
  | "deleteSession"
  | "suspendSession"
  | "assign"
  | "eval"
  | "execute"
  | "interruptSession"
>;

type ExecuteEvent = MessageInitShape<typeof ExecuteResponseSchema>;

const RDATA = "application/x-rdata";
const EMPTY = new Uint8Array(0);
/** The whitespace R's parser skips, in the bytes of a script. */
const BLANK = new Set([0x20, 0x09, 0x0a, 0x0b, 0x0c, 0x0d]);

/**
 * The script's bytes. An empty or blank one is refused (reference-behaviour §3): answering it `null`
 * would hide a client that sent nothing. Stops at the first byte that is not blank.
 */
function requiredScript(body: HttpBody | undefined): Uint8Array {
  const data = body?.data ?? EMPTY;
  if (data.every((byte) => BLANK.has(byte))) throw new Fault("invalid", "script is required");
  return data;
}

function assignSource(body: HttpBody | undefined): AssignSource {
  const data = requiredScript(body);
  const type = body?.contentType.split(";")[0]?.trim().toLowerCase();
  if (type !== RDATA) return { kind: "script", text: data };
  return { kind: "rdata", bytes: Buffer.from(Buffer.from(data).toString("latin1"), "base64") };
}

export function sessionHandlers(engine: REngine): SessionHandlers {
  return {
    async listSessions(req, ctx) {
      const caller = callerOf(ctx);
      const all = hasAnyRole(caller, SESSION_READERS);
      const subject = all ? req.subject : caller.name;
      const sessions = engine.sessions().filter((s) => subject === undefined || s.subject === subject);
      return { sessions: sessions.map(sessionMessage) };
    },

    async createSession(_req, ctx) {
      const session = await engine.createSession(callerOf(ctx).name, ctx.signal);
      return { session: sessionMessage(session) };
    },

    async deleteSessions() {
      await engine.endAllSessions();
      return {};
    },

    async getSession(req, ctx) {
      return { session: sessionMessage(sessionFor(engine, ctx, req.id, SESSION_READERS)) };
    },

    async deleteSession(req, ctx) {
      await sessionFor(engine, ctx, req.id, SESSION_READERS).end();
      return {};
    },

    async suspendSession(req, ctx) {
      await engine.suspendSession(sessionFor(engine, ctx, req.id, SESSION_READERS));
      return {};
    },

    async assign(req, ctx) {
      const session = sessionFor(engine, ctx, req.id, SESSION_USERS);
      if (req.symbol === "") throw new Fault("invalid", "Symbol to assign is required");
      // An R symbol cannot hold NUL, which ends a field of the frame that carries it.
      if (req.symbol.includes("\0")) throw new Fault("invalid", "Symbol to assign cannot hold NUL");
      const source = assignSource(req.body);
      if (req.async) {
        const command = session.submitAssign(req.symbol, source);
        return { command: commandMessage(command) };
      }
      await session.assign(req.symbol, source, ctx.signal);
      return {};
    },

    async eval(req, ctx) {
      const session = sessionFor(engine, ctx, req.id, SESSION_USERS);
      const format = negotiate(req.accept);
      const script = requiredScript(req.script);
      if (req.async) {
        const command = session.submitEval(script, format);
        return { answer: { case: "command", value: commandMessage(command) } };
      }
      const data = await session.eval(script, format, undefined, ctx.signal);
      return { answer: { case: "value", value: { contentType: contentTypeOf(format), data } } };
    },

    async *execute(req, ctx) {
      const session = sessionFor(engine, ctx, req.id, SESSION_USERS);
      const script = requiredScript(req.script);
      const format = negotiate(req.accept);
      // Leaving (cancel, deadline) interrupts R through the signal, and ends the channel: stop waiting
      // for its events too. Unbounded: R cannot be paused, so its events could only be dropped.
      const events = new Channel<ExecuteEvent>({ signal: ctx.signal });
      const push = (event: ExecuteEvent): void => void events.push(event);
      const sink = (event: EvalEvent): void => push({ event: { case: event.kind, value: event.text } });
      session
        .eval(script, format, sink, ctx.signal)
        .then(
          (value) =>
            push({
              event:
                format === "rds"
                  ? { case: "rdata", value }
                  : { case: "json", value: fromJson(ValueSchema, JSON.parse(value.toString("utf8"))) },
            }),
          (error: unknown) => push({ event: { case: "error", value: ConnectError.from(error).rawMessage } }),
        )
        .finally(() => events.close());
      yield* events;
    },

    async interruptSession(req, ctx) {
      return { interrupted: sessionFor(engine, ctx, req.id, SESSION_USERS).interrupt() };
    },
  };
}
