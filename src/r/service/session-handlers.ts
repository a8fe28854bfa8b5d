import { fromJson, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { HttpBody } from "../../../gen/es/google/api/httpbody_pb.js";
import type { Command, ExecuteResponseSchema, RService } from "../../../gen/es/rock/r/v1/rservice_pb.js";
import { callerOf, hasAnyRole } from "../../auth/caller.js";
import { Channel } from "../../channel.js";
import { Fault } from "../../errors/fault.js";
import type { EvalEvent } from "../process/child.js";
import type { REngine } from "../engine/engine.js";
import { contentTypeOf, negotiate } from "./negotiate.js";
import { commandMessage, sessionMessage } from "./messages.js";
import type { AssignSource, ValueFormat } from "../wire/protocol.js";
import { checkAccess, PACKAGE_INSTALLERS, SESSION_READERS, SESSION_USERS, sessionFor } from "./permissions.js";
import type { RSession } from "../session/session.js";
import type { CommandEntry } from "../session/commands.js";
import { sessionEnded } from "../process/faults.js";
import { AssignBody, requiredScript, type AssignLimits } from "./assign-body.js";
import { scriptDecoder } from "./script-charset.js";

export type SessionHandlers = Pick<
  ServiceImpl<typeof RService>,
  | "listSessions"
  | "createSession"
  | "deleteSessions"
  | "getSession"
  | "deleteSession"
  | "suspendSession"
  | "assign"
  | "assignStream"
  | "eval"
  | "evalStream"
  | "execute"
  | "interruptSession"
>;

type ExecuteEvent = MessageInitShape<typeof ExecuteResponseSchema>;

const EMPTY = new Uint8Array(0);

/** The script an HttpBody carries, in UTF-8 whatever its charset (see scriptDecoder), required (see requiredScript). */
function scriptOf(body: HttpBody | undefined): Uint8Array {
  return requiredScript(scriptDecoder(body?.contentType)(body?.data ?? EMPTY));
}

/** The session, answer format and script an evaluation names (Eval, EvalStream, Execute). */
function evaluationOf(
  engine: REngine,
  ctx: HandlerContext,
  req: { readonly id: string; readonly accept: string; readonly script?: HttpBody },
): { session: RSession; format: ValueFormat; script: Uint8Array } {
  return { session: sessionFor(engine, ctx, req.id, SESSION_USERS), format: negotiate(req.accept), script: scriptOf(req.script) };
}

/** A symbol to assign: present, and without NUL (an R symbol cannot hold one; it ends a frame's field). */
function checkedSymbol(symbol: string): string {
  if (symbol === "") throw new Fault("invalid", "Symbol to assign is required");
  if (symbol.includes("\0")) throw new Fault("invalid", "Symbol to assign cannot hold NUL");
  return symbol;
}

async function* oneChunk(data: Uint8Array | undefined): AsyncIterable<Uint8Array> {
  if (data && data.length > 0) yield data;
}

/**
 * Assigns what `chunks` hold to `symbol` (see AssignBody), now or as a command, never half assigned.
 * A large value is queued as soon as it is known to be one, and R unserializes it while it arrives;
 * a body that fails (the client left, a bad byte, over its limit) gives the assign up, and a value R
 * refused stops the reading of the rest of the body.
 */
async function assignFrom(
  session: RSession,
  symbol: string,
  async: boolean,
  contentType: string | undefined,
  chunks: AsyncIterable<Uint8Array>,
  limits: AssignLimits,
  signal: AbortSignal,
): Promise<{ command?: Command }> {
  const body = new AssignBody(contentType, () => session.dirs, limits);
  // Gives a queued or running assign up when its body fails, as the client leaving does.
  const giveUp = new AbortController();
  const leave = (): void => giveUp.abort(signal.reason);
  signal.addEventListener("abort", leave, { once: true });
  let entry: CommandEntry | undefined;
  let assigned: Promise<unknown> | undefined;
  let refused: { error: unknown } | undefined;
  const start = (source: AssignSource): Promise<unknown> => {
    if (async) {
      entry = session.submitAssign(symbol, source);
      return Promise.resolve();
    }
    const done = session.assign(symbol, source, giveUp.signal);
    done.catch((error: unknown) => (refused = { error }));
    return done;
  };
  try {
    for await (const chunk of chunks) {
      await body.push(chunk);
      if (refused) throw refused.error;
      if (body.feed) assigned ??= start({ kind: "stream", feed: body.feed });
    }
    const source = await body.finish();
    await (assigned ?? start(source));
    return entry ? { command: commandMessage(entry) } : {};
  } catch (error) {
    giveUp.abort(error);
    if (entry) session.commands.remove(entry.id);
    await body.discard();
    // R's refusal, or the session's end under the body, is what to answer: not what the writes then met.
    throw refused ? refused.error : session.closed ? sessionEnded() : error;
  } finally {
    signal.removeEventListener("abort", leave);
  }
}

export function sessionHandlers(engine: REngine, limits: AssignLimits): SessionHandlers {
  return {
    async listSessions(req, ctx) {
      const caller = callerOf(ctx);
      const all = hasAnyRole(caller, SESSION_READERS);
      const subject = all ? req.subject : caller.name;
      const sessions = engine.sessions().filter((s) => subject === undefined || s.subject === subject);
      return { sessions: sessions.map(sessionMessage) };
    },

    async createSession(_req, ctx) {
      const caller = callerOf(ctx);
      const session = await engine.createSession(caller.name, ctx.signal, hasAnyRole(caller, PACKAGE_INSTALLERS));
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
      await engine.deleteSession(req.id, (owner) => checkAccess(ctx, req.id, owner, SESSION_READERS));
      return {};
    },

    async suspendSession(req, ctx) {
      await engine.suspendSession(sessionFor(engine, ctx, req.id, SESSION_READERS));
      return {};
    },

    async assign(req, ctx) {
      const session = sessionFor(engine, ctx, req.id, SESSION_USERS);
      const symbol = checkedSymbol(req.symbol);
      return assignFrom(session, symbol, req.async, req.body?.contentType, oneChunk(req.body?.data), limits, ctx.signal);
    },

    async assignStream(requests, ctx) {
      const messages = requests[Symbol.asyncIterator]();
      const first = await messages.next();
      if (first.done) throw new Fault("invalid", "Assign names no R session");
      const { id, symbol, async, contentType } = first.value;
      const session = sessionFor(engine, ctx, id, SESSION_USERS);
      async function* chunks(): AsyncIterable<Uint8Array> {
        const data = first.value?.chunk?.data;
        if (data && data.length > 0) yield data;
        for (let next = await messages.next(); !next.done; next = await messages.next()) {
          const more = next.value.chunk?.data;
          if (more && more.length > 0) yield more;
        }
      }
      return assignFrom(session, checkedSymbol(symbol), async, contentType, chunks(), limits, ctx.signal);
    },

    async eval(req, ctx) {
      const { session, format, script } = evaluationOf(engine, ctx, req);
      if (req.async) {
        const command = session.submitEval(script, format);
        return { answer: { case: "command", value: commandMessage(command) } };
      }
      const data = await session.eval(script, format, undefined, ctx.signal);
      return { answer: { case: "value", value: { contentType: contentTypeOf(format), data } } };
    },

    async *evalStream(req, ctx) {
      const { session, format, script } = evaluationOf(engine, ctx, req);
      if (req.async) {
        yield { answer: { case: "command", value: commandMessage(session.submitEval(script, format)) } };
        return;
      }
      const contentType = contentTypeOf(format);
      for await (const data of session.evalStream(script, format, ctx.signal))
        yield { answer: { case: "chunk", value: { contentType, data } } };
    },

    async *execute(req, ctx) {
      const { session, format, script } = evaluationOf(engine, ctx, req);
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
