import fs from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { parse as parseYaml, stringify } from "yaml";
import type { UserConfig } from "../config/config.js";
import { hashSecret } from "./secrets.js";

const FILE = "users.generated.yaml";

/**
 * With no users configured, the first start creates an `administrator` with a random password,
 * prints it once and keeps only its bcrypt hash in the data folder; later starts reuse the hash.
 */
export async function bootstrapUsers(configured: readonly UserConfig[], dataDir: string, announce: (text: string) => void): Promise<readonly UserConfig[]> {
  if (configured.length > 0) return configured;
  const file = path.join(dataDir, FILE);
  if (fs.existsSync(file)) return parseYaml(fs.readFileSync(file, "utf8")) as UserConfig[];
  const password = randomBytes(18).toString("base64url");
  const users: UserConfig[] = [{ name: "administrator", secret: await hashSecret(password), roles: ["administrator"] }];
  fs.mkdirSync(dataDir, { recursive: true });
  fs.writeFileSync(file, stringify(users), { mode: 0o600 });
  announce(`No users configured: created user 'administrator' with password ${password} (shown once; its hash is in ${file})`);
  return users;
}
