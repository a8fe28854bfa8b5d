/** Writes worker.R's constants of the protocol from src/r/protocol-table.ts (run by `npm run gen`). */
import fs from "node:fs";
import path from "node:path";
import { withRProtocol } from "./r-protocol.js";

const worker = path.resolve(import.meta.dirname, "../../src/r/worker.R");
fs.writeFileSync(worker, withRProtocol(fs.readFileSync(worker, "utf8")));
