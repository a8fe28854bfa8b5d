import { runCommandLine } from "./cli/commands.js";
import { startRock } from "./compose.js";
import type { Config } from "./config/config.js";
import { prepareService } from "./setup/service-prerequisites.js";
import { createLogger, type Logger } from "./server/logger.js";
import { installSignalHandlers } from "./shutdown.js";

// --help, --version, hash-password, usage errors and a configuration that cannot be used end here.
const outcome = await runCommandLine(process.argv.slice(2));
if (outcome.kind === "exit") process.exit(outcome.code);

// A log format that cannot be used (pretty without pino-pretty installed) is a configuration error too.
let logger: Logger;
try {
  logger = createLogger(outcome.config.log);
} catch (e) {
  process.stderr.write(`rock-ts: configuration: ${(e as Error).message}\n`);
  process.exit(1);
}
// Before listening: a service whose R can never start would answer 500 for as long as it runs.
let config: Config;
try {
  config = await prepareService(outcome.config, { systemPackages: false, progress: (line) => logger.info(line) });
} catch (e) {
  logger.error("could not start", { error: (e as Error).message });
  process.exit(1);
}
try {
  const rock = await startRock(config, { logger });
  installSignalHandlers(rock, logger);
} catch (e) {
  logger.error("could not start", { error: (e as Error).message });
  process.exit(1);
}
