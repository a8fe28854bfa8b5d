/** Writes README.md's configuration table from src/config/settings.ts (run by `npm run gen`). */
import fs from "node:fs";
import path from "node:path";
import { withConfigurationTable } from "./config-doc.js";

const readme = path.resolve(import.meta.dirname, "../../README.md");
fs.writeFileSync(readme, withConfigurationTable(fs.readFileSync(readme, "utf8")));
