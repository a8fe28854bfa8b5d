import { setFlagsFromString } from "node:v8";
import { runCommandLine } from "./cli/commands.js";
import { startRock } from "./compose.js";
import type { Config } from "./config/config.js";
import { prepareService } from "./setup/service-prerequisites.js";
import { createLogger, type Logger } from "./server/logger.js";
import { installSignalHandlers } from "./shutdown.js";

// V8 starts a full collection once the old generation's room left, counting the memory outside its
// heap allocated since the last one, is smaller than the young generation. Bodies streamed at 1 GB/s
// (uploads, assigns) allocate a buffer per socket read, and at V8's usual growth after a collection
// (about 2× the live heap: ~24 MB of room) they used that room up again at once: 20–35 mark-compacts a
// GiB, ~1 s of CPU, half the rate, until some pause let the heap grow. The old generation may grow to
// 4× its live size instead (V8's own largest factor): 0–2 a GiB (`BENCH_ONLY=transfers`, `assign`).
setFlagsFromString("--heap-growing-percent=300");

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
