import { loadConfig } from "./config/load.js";
import { startRock } from "./compose.js";
import { createLogger } from "./server/logger.js";

const logger = createLogger();
try {
  const rock = await startRock(loadConfig(), { logger });
  const stop = async (signal: string) => {
    logger.info("stopping", { signal });
    await rock.close();
    process.exit(0);
  };
  process.once("SIGINT", () => void stop("SIGINT"));
  process.once("SIGTERM", () => void stop("SIGTERM"));
} catch (e) {
  logger.error("could not start", { error: (e as Error).message });
  process.exit(1);
}
