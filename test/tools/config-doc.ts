/**
 * The configuration table of CONFIG_DOC, made from the settings' table (src/config/settings.ts):
 * written by gen-config-doc.ts, compared by check-gen.ts (generated-docs.ts).
 */
import path from "node:path";
import type { AnySetting } from "../../src/config/setting.js";
import { settingsOf } from "../../src/config/setting.js";
import { CONFIG_VARIABLE, SETTINGS } from "../../src/config/settings.js";

/** The page that holds the table, from the repository's root. */
export const CONFIG_DOC = "docs/configuration.md";

const BEGIN = "<!-- The table is made from src/config/settings.ts by `npm run gen`: edit it there. -->";
const END = "<!-- End of the generated table. -->";

function row(cells: readonly string[]): string {
  return `| ${cells.join(" | ")} |`;
}

/** This server's variable, or Rock's, as the page says them. */
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
    ...settingsOf(SETTINGS).map(([key, setting]) => settingRow(key, setting)),
  ].join("\n");
}

/** The page with the table between its markers made anew. */
export function withConfigurationTable(page: string): string {
  return between(page, BEGIN, END, table());
}

/** The README's table of the settings everyone sets: rows of the same table, for a few keys. */
export const COMMON_SETTINGS_DOC = "README.md";

const COMMON_KEYS = [
  "port",
  "dataDir",
  "users",
  "node.id",
  "node.publicUrl",
  "tls.cert",
  "tls.key",
  "r.isolation",
  "r.maxSessions",
  "r.maxSessionsPerUser",
  "r.sessionMemoryMb",
  "r.sessionTimeoutMinutes",
  "packages.repos",
  "log.level",
];

const COMMON_BEGIN = "<!-- The rows are docs/configuration.md's, made from src/config/settings.ts by `npm run gen`: edit them there. -->";
const COMMON_END = "<!-- End of the settings everyone sets. -->";

function commonTable(): string {
  const settings = new Map(settingsOf(SETTINGS));
  return [
    row(["key", "environment", "default", "meaning"]),
    "|---|---|---|---|",
    ...COMMON_KEYS.map((key) => {
      const setting = settings.get(key);
      if (!setting) throw new Error(`${key} is not a setting of src/config/settings.ts`);
      return fromReadme(settingRow(key, setting));
    }),
  ].join("\n");
}

/** The README with its table of the settings everyone sets made anew. */
export function withCommonSettingsTable(readme: string): string {
  return between(readme, COMMON_BEGIN, COMMON_END, commonTable());
}

/** A row written for docs/ with its relative links made from the repository's root, where the README is. */
function fromReadme(line: string): string {
  return line.replace(/\]\((?!https?:|#)([^)]+)\)/g, (_, target: string) => {
    const rebased = path.posix.normalize(`docs/${target}`);
    return `](${rebased.startsWith("README.md#") ? rebased.slice("README.md".length) : rebased})`;
  });
}

function settingRow(key: string, setting: AnySetting): string {
  return row([`\`${key}\``, variables(setting), setting.shownDefault(), setting.spec.meaning]);
}

function between(page: string, begin: string, end: string, made: string): string {
  const from = page.indexOf(begin);
  const to = page.indexOf(end);
  if (from < 0 || to < from) throw new Error(`the generated table's markers are missing ("${begin}" then "${end}")`);
  return `${page.slice(0, from + begin.length)}\n\n${made}\n\n${page.slice(to)}`;
}
