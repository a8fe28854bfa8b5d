/** Writes gen/r/protocol.R, the R side's constants of the protocol, from src/r/wire/protocol-table.ts (run by `npm run gen`). */
import fs from "node:fs";
import path from "node:path";
import { rProtocolFile } from "./r-protocol.js";

const file = path.resolve(import.meta.dirname, "../../gen/r/protocol.R");
fs.mkdirSync(path.dirname(file), { recursive: true });
fs.writeFileSync(file, rProtocolFile());
