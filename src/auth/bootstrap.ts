import fs from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { parse as parseYaml, stringify } from "yaml";
import type { UserConfig } from "../config/config.js";
import { hashSecret } from "./secrets.js";

const FILE = "users.generated.yaml";
export const PASSWORD_FILE = "administrator-password.txt";

/**
 * With no users configured, the first start creates an `administrator` with a random password and
 * keeps only its bcrypt hash in the data folder; later starts reuse the hash. The password is shown
 * once when `announce` reaches a terminal; otherwise (a service manager, a container: the text would
 * end up in logs) it is written to a file that only this account can read, and only its path is shown.
 */
export async function bootstrapUsers(
  configured: readonly UserConfig[],
  dataDir: string,
  announce: (text: string) => void,
  toTerminal = false,
): Promise<readonly UserConfig[]> {
  if (configured.length > 0) return configured;
  const file = path.join(dataDir, FILE);
  if (fs.existsSync(file)) return parseYaml(fs.readFileSync(file, "utf8")) as UserConfig[];
  const password = randomBytes(18).toString("base64url");
  const users: UserConfig[] = [{ name: "administrator", secret: await hashSecret(password), roles: ["administrator"] }];
  fs.mkdirSync(dataDir, { recursive: true });
  const passwordFile = path.join(dataDir, PASSWORD_FILE);
  // Written before the users, so that no start leaves an administrator whose password is nowhere. A
  // stale file is replaced, never followed ('wx' refuses a symbolic link planted there).
  if (!toTerminal) {
    fs.rmSync(passwordFile, { force: true });
    fs.writeFileSync(passwordFile, `${password}\n`, { mode: 0o600, flag: "wx" });
  }
  fs.writeFileSync(file, stringify(users), { mode: 0o600 });
  announce(
    toTerminal
      ? `No users configured: created user 'administrator' with password ${password} (shown once; its hash is in ${file})`
      : `No users configured: created user 'administrator'; its password is in ${passwordFile} (readable by this account only; delete it once noted)`,
  );
  return users;
}
