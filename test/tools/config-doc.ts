/**
 * The configuration table of CONFIG_DOC, made from the settings' table (src/config/settings.ts):
 * written by gen-config-doc.ts, compared by check-gen.ts (generated-docs.ts).
 */
import type { AnySetting } from "../../src/config/setting.js";
import { settingsOf } from "../../src/config/setting.js";
import { CONFIG_VARIABLE, SETTINGS } from "../../src/config/settings.js";

/** The page that holds the table, from the repository's root. */
export const CONFIG_DOC = "README.md";

const BEGIN = "<!-- The table is made from src/config/settings.ts by `npm run gen`: edit it there. -->";
const END = "<!-- End of the generated table. -->";

function row(cells: readonly string[]): string {
  return `| ${cells.join(" | ")} |`;
}

/** This server's variable, or Rock's, as the README says them. */
function variables(setting: AnySetting): string {
  const { env, rock, alsoSetBy } = setting.spec;
  const names = [env === undefined ? "" : `\`${env}\``, rock === undefined ? "" : `Rock's \`${rock}\``].filter(Boolean).join(", or ");
  return `${names}${setting.form === undefined ? "" : ` (${setting.form})`}${alsoSetBy === undefined ? "" : `; ${alsoSetBy}`}`;
}

function table(): string {
  return [
    row(["key", "environment", "default", "meaning"]),
    "|---|---|---|---|",
    row(["—", `\`${CONFIG_VARIABLE}\``, "none", "the YAML file, when `--config` is not given"]),
    ...settingsOf(SETTINGS).map(([key, setting]) => row([`\`${key}\``, variables(setting), setting.shownDefault(), setting.spec.meaning])),
  ].join("\n");
}

/** The page with the table between its markers made anew. */
export function withConfigurationTable(page: string): string {
  const begin = page.indexOf(BEGIN);
  const end = page.indexOf(END);
  if (begin < 0 || end < begin) throw new Error(`the configuration table's markers are missing ("${BEGIN}" then "${END}")`);
  return `${page.slice(0, begin + BEGIN.length)}\n\n${table()}\n\n${page.slice(end)}`;
}
