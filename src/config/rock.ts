import type { UserConfig } from "./config.js";
import { user } from "./users.js";

/**
 * Rock's container variables that are not one setting each: every `<prefix>_NAME` / `<prefix>_PASSWORD`
 * pair is one user of the role; Consul's are accepted and reported (docs/configuration.md).
 */
const ROLE_PAIRS = [
  ["ROCK_ADMINISTRATOR", "administrator"],
  ["ROCK_MANAGER", "manager"],
  ["ROCK_USER", "user"],
] as const;

const CONSUL = ["ROCK_CONSUL_SERVER", "ROCK_CONSUL_TOKEN", "ROCK_CONSUL_INTERVAL"];

export const ROCK_ONLY_VARIABLES: readonly string[] = [
  ...ROLE_PAIRS.flatMap(([prefix]) => [`${prefix}_NAME`, `${prefix}_PASSWORD`]),
  ...CONSUL,
];

/** The role pairs as docs/configuration.md's table says them. */
export const ROLE_PAIRS_SHOWN = `Rock's ${ROLE_PAIRS.map(([prefix]) => `\`${prefix}_NAME\`/\`_PASSWORD\``).join(", ")}`;

type Variable = (name: string) => string | undefined;

/** The users with the pairs' added; a user of the same name is replaced (the environment overrides the file). */
export function withRoleUsers(users: readonly UserConfig[], variable: Variable): UserConfig[] {
  const pairs: UserConfig[] = [];
  const named = new Map<string, string>();
  for (const [prefix, role] of ROLE_PAIRS) {
    const name = variable(`${prefix}_NAME`);
    const secret = variable(`${prefix}_PASSWORD`);
    if (name === undefined && secret === undefined) continue;
    // Rock's image falls back to the password "password"; a half-configured user is refused instead.
    if (name === undefined) throw new Error(`${prefix}_PASSWORD is set but ${prefix}_NAME is not`);
    if (secret === undefined) throw new Error(`${prefix}_NAME is set but ${prefix}_PASSWORD is not`);
    const earlier = named.get(name);
    if (earlier) throw new Error(`${prefix}_NAME: user '${name}' is already ${earlier}`);
    named.set(name, `${prefix}_NAME`);
    pairs.push(user(name, secret, [role], `${prefix}_PASSWORD`));
  }
  return [...users.filter((u) => !named.has(u.name)), ...pairs];
}

/**
 * Rock's variables this server accepts without doing what Rock does with them, each with what it does
 * instead (a compose file written for Rock must start it unchanged, and say so).
 */
export function rockOnlyWarnings(variable: Variable): string[] {
  const warnings: string[] = [];
  const consul = CONSUL.filter((name) => variable(name) !== undefined);
  if (consul.length > 0) {
    warnings.push(
      `${consul.join(", ")}: Consul registration (Rock 1.x) is not done by this server; it registers with Opal (ROCK_OPAL_SERVER) and a load balancer finds it by health checks on /_check (docs/operations.md, Several nodes)`,
    );
  }
  const home = variable("ROCK_HOME");
  if (home !== undefined) {
    const dataDir = variable("ROCK_DATA_DIR");
    warnings.push(
      dataDir !== undefined
        ? `ROCK_HOME (${home}) is not used: every file of this server is in its data folder, ROCK_DATA_DIR (${dataDir})`
        : `ROCK_HOME: this server keeps every file (catalogue, session folders, R console log, generated secrets) in its data folder, here ROCK_HOME (${home}); Rock's conf/ and logs/ layout is not used`,
    );
  }
  return warnings;
}
