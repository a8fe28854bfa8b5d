import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { RService, ServerStatusSchema } from "../../../gen/es/rock/r/v1/rservice_pb.js";
import type { NodeConfig, RConfig } from "../../config/config.js";
import { Fault } from "../../errors/fault.js";
import type { REngine } from "../engine/engine.js";
import { negotiate, OCTET_STREAM } from "./negotiate.js";

export type ServerHandlers = Pick<
  ServiceImpl<typeof RService>,
  "getInfo" | "check" | "getServerStatus" | "startServer" | "stopServer" | "getVersion" | "getLog" | "tailLog"
>;

const DEFAULT_LOG_LINES = 1000;
const SERVICE_TYPE = "rock";

/** `ready`: false while the service warms up, which /_check reports as not ready yet. */
export function serverHandlers(engine: REngine, node: NodeConfig, r: RConfig, ready: () => boolean): ServerHandlers {
  const status = async (): Promise<MessageInitShape<typeof ServerStatusSchema>> => {
    const s = await engine.status();
    return {
      id: node.id,
      cluster: node.cluster,
      version: s.version,
      encoding: r.encoding,
      tags: [...node.tags],
      running: s.running,
      sessions: { ...s.sessions, usage: [...(s.sessions.usage ?? [])] },
      system: { cores: s.cores, freeMemory: s.freeMemory },
      sessionNetwork: engine.sessionNetwork,
    };
  };

  return {
    async getInfo() {
      return {
        id: node.id,
        name: node.name ?? node.id,
        type: SERVICE_TYPE,
        cluster: node.cluster,
        tags: [...node.tags],
        server: node.publicUrl,
        sessionNetwork: engine.sessionNetwork,
      };
    },

    async check() {
      if (!ready()) throw new Fault("internal", "R server is warming up");
      if (!(await engine.check())) throw new Fault("internal", "R server is not functional");
      return {};
    },

    async getServerStatus() {
      return { status: await status() };
    },

    async startServer() {
      await engine.start();
      return { status: await status() };
    },

    async stopServer() {
      await engine.stop();
      return { status: await status() };
    },

    async getVersion(req, ctx) {
      const format = negotiate(req.accept);
      const value = await engine.rVersion(format, ctx.signal);
      if (format === "rds") return { answer: { case: "serialized", value: { contentType: OCTET_STREAM, data: value } } };
      return { answer: { case: "version", value: JSON.parse(value.toString("utf8")) as JsonObject } };
    },

    async getLog(req) {
      const lines = engine.log.last(req.limit ?? DEFAULT_LOG_LINES);
      const text = lines.length > 0 ? `${lines.join("\n")}\n` : "";
      // R's output is UTF-8: said, so that a client that decodes text/plain as ISO-8859-1 by default
      // (Opal's RestTemplate) reads R's quotes and accents as printed.
      return { text: { contentType: "text/plain; charset=utf-8", data: Buffer.from(text, "utf8") } };
    },

    async *tailLog(req, ctx) {
      for await (const line of engine.log.tail(req.limit ?? DEFAULT_LOG_LINES, req.follow, ctx.signal)) yield { line };
    },
  };
}
