/**
 * Writes the configuration table of CONFIG_DOC, and the README's rows of the settings everyone sets,
 * from src/config/settings.ts (run by `npm run gen`).
 */
import fs from "node:fs";
import path from "node:path";
import { COMMON_SETTINGS_DOC, CONFIG_DOC, withCommonSettingsTable, withConfigurationTable } from "./config-doc.js";

const root = path.resolve(import.meta.dirname, "../..");
for (const [file, make] of [
  [CONFIG_DOC, withConfigurationTable],
  [COMMON_SETTINGS_DOC, withCommonSettingsTable],
] as const) {
  const page = path.join(root, file);
  fs.writeFileSync(page, make(fs.readFileSync(page, "utf8")));
}
