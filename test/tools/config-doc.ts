/**
 * README.md's configuration table, made from the settings' table (src/config/settings.ts): written by
 * gen-config-doc.ts, compared by check-gen.ts.
 */
import type { AnySetting } from "../../src/config/setting.js";
import { settingsOf } from "../../src/config/setting.js";
import { CONFIG_VARIABLE, SETTINGS } from "../../src/config/settings.js";

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

/** The README with the table between its markers made anew. */
export function withConfigurationTable(readme: string): string {
  const begin = readme.indexOf(BEGIN);
  const end = readme.indexOf(END);
  if (begin < 0 || end < begin) throw new Error(`README.md: the configuration table's markers are missing ("${BEGIN}" then "${END}")`);
  return `${readme.slice(0, begin + BEGIN.length)}\n\n${table()}\n\n${readme.slice(end)}`;
}
