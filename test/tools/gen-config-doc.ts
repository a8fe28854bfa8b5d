/** Writes the configuration table of CONFIG_DOC from src/config/settings.ts (run by `npm run gen`). */
import fs from "node:fs";
import path from "node:path";
import { CONFIG_DOC, withConfigurationTable } from "./config-doc.js";

const page = path.resolve(import.meta.dirname, "../..", CONFIG_DOC);
fs.writeFileSync(page, withConfigurationTable(fs.readFileSync(page, "utf8")));
