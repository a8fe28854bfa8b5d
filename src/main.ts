import { runCommandLine } from "./cli/commands.js";
import { startRock } from "./compose.js";
import { createLogger } from "./server/logger.js";
import { installSignalHandlers } from "./shutdown.js";

// --help, --version, hash-password, usage errors and a configuration that cannot be used end here.
const outcome = await runCommandLine(process.argv.slice(2));
if (outcome.kind === "exit") process.exit(outcome.code);

const logger = createLogger();
try {
  const rock = await startRock(outcome.config, { logger });
  installSignalHandlers(rock, logger);
} catch (e) {
  logger.error("could not start", { error: (e as Error).message });
  process.exit(1);
}
