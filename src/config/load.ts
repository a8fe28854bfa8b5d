import fs from "node:fs";
import path from "node:path";
import { parse as parseYaml } from "yaml";
import { parsePeers, PeerTable } from "../cluster/peers.js";
import type { Config } from "./config.js";
import { ROCK_ONLY_VARIABLES, rockOnlyWarnings, withRoleUsers } from "./rock.js";
import { isSetting, settingsOf, type Group, type Written } from "./setting.js";
import { CONFIG_VARIABLE, SETTINGS, settingValues } from "./settings.js";

/** Every setting has a default: the server runs with no file and no environment. */
export function defaults(): Config {
  return { ...settingValues({ file: new Map(), variable: () => undefined }), warnings: [] };
}

type Env = Readonly<Record<string, string | undefined>>;

/** Defaults, then the YAML file (`file`, else ROCK_CONFIG), then ROCK_* environment variables. */
export function loadConfig(file?: string, env: Env = process.env): Config {
  refuseUnknown(env);
  // What a compose file's `${VAR}` of an unset VAR gives.
  const variable = (name: string): string | undefined => (env[name] === "" ? undefined : env[name]);
  const source = file ?? variable(CONFIG_VARIABLE);
  const settings = settingValues({ file: source === undefined ? new Map() : written(readYaml(source), SETTINGS, source), variable });
  const config: Config = {
    ...settings,
    users: withRoleUsers(settings.users, variable),
    warnings: rockOnlyWarnings(variable),
    ...(source === undefined ? {} : { configFile: path.resolve(source) }),
  };
  // Across keys: the peers' ids and tags, and the catalogue's node among them.
  new PeerTable(config.node.id, parsePeers(config.cluster.peers), config.cluster.catalogNode);
  return config;
}

const KNOWN_VARIABLES = new Set([
  CONFIG_VARIABLE,
  ...ROCK_ONLY_VARIABLES,
  ...settingsOf(SETTINGS).flatMap(([, setting]) => setting.variables),
]);

/** Whatever other ROCK_* variable is set is a typo or a setting this server does not have: refused, not ignored. */
function refuseUnknown(env: Env): void {
  const unknown = Object.keys(env)
    .filter((name) => name.startsWith("ROCK_") && !KNOWN_VARIABLES.has(name))
    .sort();
  if (unknown.length > 0) {
    throw new Error(
      `unknown environment variable${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")} (docs/configuration.md lists them all)`,
    );
  }
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function readYaml(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (e) {
    throw new Error(`${file}: cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  const doc: unknown = parseYaml(text);
  if (doc === null || doc === undefined) return {};
  if (!isMapping(doc)) throw new Error(`${file}: the configuration must be a mapping`);
  return doc;
}

/** The file's values by dotted key; a key the table does not have is a typo, an error rather than a silent default. */
function written(doc: Record<string, unknown>, group: Group, file: string, prefix = ""): Map<string, Written> {
  const found = new Map<string, Written>();
  for (const [name, value] of Object.entries(doc)) {
    const key = prefix + name;
    const entry = Object.hasOwn(group, name) ? group[name] : undefined;
    if (entry === undefined) throw new Error(`${file}: unknown setting '${key}'`);
    // A key written without a value keeps the default.
    if (value === null || value === undefined) continue;
    if (isSetting(entry)) found.set(key, { value, where: `${file}: ${key}` });
    else if (isMapping(value)) for (const [k, w] of written(value, entry, file, `${key}.`)) found.set(k, w);
    else throw new Error(`${file}: ${key}: expected a mapping`);
  }
  return found;
}
