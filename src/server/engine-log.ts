import type { EngineEvent } from "../r/engine.js";
import type { Logger } from "./logger.js";

/** The R server's and sessions' lifecycle in the service log (what R prints stays in the console log). */
export function engineLog(logger: Logger): (event: EngineEvent) => void {
  return (e) => {
    switch (e.kind) {
      case "server-started":
        return logger.info(e.restart ? "R server restarted" : "R server started", { version: e.version });
      case "server-start-failed":
        return logger.error(e.restart ? "R server restart failed" : "R server start failed", { error: e.error });
      case "server-stopped":
        return logger.info("R server stopped");
      case "server-crashed":
        return logger.error("R server exited unexpectedly", { autoRestart: e.autoRestart });
      case "session-opened":
        return logger.info("R session opened", { session: e.id, user: e.user });
      case "session-closed":
        return logger.info("R session closed", { session: e.id, user: e.user });
      case "session-reaped":
        return logger.info("R session idle, closing", { session: e.id, user: e.user });
      case "session-out-of-memory":
        return logger.warn(e.reason, { session: e.id, user: e.user });
      case "spare-died":
        return logger.warn("spare R session process died; another is forked at the next session or check");
    }
  };
}
