import { parseSecret } from "./secret-format.js";
import type { UserConfig } from "./config.js";
import type { Kind } from "./setting.js";

/** A user whose secret this server can check: a `{…}` prefix it does not know stops the start, naming the user. */
export function user(name: string, secret: string, roles: string[], where: string): UserConfig {
  try {
    parseSecret(secret);
  } catch (e) {
    throw new Error(`${where} (user '${name}'): ${(e as Error).message}`);
  }
  return { name, secret, roles };
}

function fromFile(value: unknown, where: string): UserConfig[] {
  if (!Array.isArray(value)) throw new Error(`${where}: expected a list of {name, secret, roles}`);
  const entries: unknown[] = value;
  return entries.map((u, i) => {
    const o = u as Partial<Record<keyof UserConfig, unknown>>;
    if (typeof o?.name !== "string" || typeof o.secret !== "string") throw new Error(`${where}[${i}]: name and secret are required`);
    const roles = Array.isArray(o.roles) ? o.roles.map(String) : typeof o.roles === "string" ? o.roles.split(",").map((r) => r.trim()) : [];
    return user(o.name, o.secret, roles, `${where}[${i}]`);
  });
}

/** `name:secret:role,role;name:secret:role` (a secret may hold ':'; the hashed forms hold neither ';' nor ','). */
function fromText(text: string, where: string): UserConfig[] {
  return text
    .split(";")
    .filter((s) => s.trim())
    .map((entry) => {
      const first = entry.indexOf(":");
      const last = entry.lastIndexOf(":");
      if (first <= 0 || last === first) throw new Error(`${where}: expected name:secret:roles entries separated by ';'`);
      const roles = entry
        .slice(last + 1)
        .split(",")
        .map((r) => r.trim())
        .filter(Boolean);
      return user(entry.slice(0, first).trim(), entry.slice(first + 1, last), roles, where);
    });
}

export const users: Kind<readonly UserConfig[]> = {
  fromFile,
  fromText,
  show: (list) => (list.length === 0 ? "none" : list.map((u) => `\`${u.name}\``).join(", ")),
  form: "`name:secret:role,role;…`",
};
