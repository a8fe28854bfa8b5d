import { spawn } from "node:child_process";
import { lstatSync, readdirSync } from "node:fs";
import { chmod, lstat, mkdir, mkdtemp, readdir, readlink, rename, rm, unlink } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import type { Owner } from "../confine/as-owner.js";
import { isValidPackageName } from "./validation.js";

/**
 * What identifies one install of a package in a library: its `Meta/package.rds`, which R CMD INSTALL
 * writes anew at each install; undefined when the folder holds no installed package (or one being
 * installed: R moves it into place whole, Meta included).
 */
function installStamp(library: string, name: string): string | undefined {
  try {
    const meta = lstatSync(join(library, name, "Meta", "package.rds"));
    return meta.isFile() ? `${meta.ino}:${meta.mtimeMs}:${meta.size}` : undefined;
  } catch {
    return undefined;
  }
}

/** The installed packages of a library folder, each with its install's stamp; none when it is gone. */
export function installedPackages(library: string): Map<string, string> {
  const installed = new Map<string, string>();
  let entries: string[];
  try {
    entries = readdirSync(library);
  } catch {
    return installed;
  }
  for (const name of entries) {
    if (!isValidPackageName(name)) continue;
    const stamp = installStamp(library, name);
    if (stamp !== undefined) installed.set(name, stamp);
  }
  return installed;
}

export interface PublishRequest {
  /** The session's library, which its own processes write. */
  readonly from: string;
  /** The service's package library. */
  readonly into: string;
  /** Installed packages of `from` to copy. */
  readonly names: readonly string[];
  /** The session's uid: `from` is read as it, never as the service's user. */
  readonly owner?: Owner;
  /** Appends complete lines to the console log. */
  readonly log: (text: string) => void;
}

/**
 * Copies installed packages from a session's library into the service's library, where the package
 * API's installs go, each replacing the package of its name in one rename.
 *
 * The session's folder is its own uid's, and that uid's processes may still run: the service never
 * walks it as root (a folder swapped for a symbolic link would show it anything). `tar` reads it as
 * the session's uid, so what is copied is only what the session could read anyway, and another `tar`
 * writes the copy as the service into a folder of its own beside the library, owned by the service
 * (--no-same-owner) with the service's umask (--no-same-permissions): no set-uid bit, no owner of
 * the session's. What tar would still bring that a library has no use for is removed before the
 * rename (tidy): special files, and symbolic links that leave their package.
 */
export async function publishPackages(request: PublishRequest): Promise<string[]> {
  const { from, into, names, owner, log } = request;
  if (names.length === 0) return [];
  await mkdir(into, { recursive: true });
  // In the library itself so that the renames stay on one file system; R takes 00LOCK* folders for
  // its locks and lists none of them as a package.
  const staging = await mkdtemp(join(into, "00LOCK-session-"));
  // Where the packages replaced go until the staging folder is removed: a name no package can have.
  const replaced = join(staging, ".replaced");
  try {
    await mkdir(replaced);
    await copyTree(from, staging, names, owner);
    const published: string[] = [];
    for (const name of names) {
      const copy = join(staging, name);
      if (installStamp(staging, name) === undefined) {
        log(`[packages] ${name} in ${from} is not a whole installed package: not shared\n`);
        continue;
      }
      const dropped = await tidy(copy, copy);
      if (dropped.length > 0) log(`[packages] ${name}: left out ${dropped.join(", ")}\n`);
      await rename(join(into, name), join(replaced, name)).catch(ignoreMissing);
      await rename(copy, join(into, name));
      published.push(name);
    }
    return published;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** `tar` from `from` (read as `owner`) into `to` (written as the service). */
function copyTree(from: string, to: string, names: readonly string[], owner: Owner | undefined): Promise<void> {
  const env = { PATH: "/usr/bin:/bin", LC_ALL: "C" };
  const reader = spawn("tar", ["-C", from, "-cf", "-", "--", ...names], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
    ...(owner ? { uid: owner.uid, gid: owner.gid } : {}),
  });
  const writer = spawn("tar", ["-C", to, "-xf", "-", "--no-same-owner", "--no-same-permissions"], {
    env,
    stdio: ["pipe", "ignore", "pipe"],
  });
  reader.stdout.pipe(writer.stdin);
  return Promise.all([ended(reader, "reading the session's library"), ended(writer, "writing the service's library")]).then(
    () => undefined,
  );
}

function ended(child: ReturnType<typeof spawn>, what: string): Promise<void> {
  let stderr = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (text: string) => (stderr = (stderr + text).slice(-2000)));
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`tar failed ${what}: ${stderr.trim() || `exit code ${code}`}`)),
    );
  });
}

/**
 * Gives folders 0755 and files 0644 (0755 when executable), and removes what is neither a folder, a
 * file nor a symbolic link that stays inside `root`; answers what it removed, relative to `root`.
 */
async function tidy(path: string, root: string): Promise<string[]> {
  const info = await lstat(path);
  if (info.isDirectory()) {
    await chmod(path, 0o755);
    const dropped: string[] = [];
    for (const entry of await readdir(path)) dropped.push(...(await tidy(join(path, entry), root)));
    return dropped;
  }
  if (info.isFile()) {
    await chmod(path, info.mode & 0o100 ? 0o755 : 0o644);
    return [];
  }
  if (info.isSymbolicLink()) {
    const target = await readlink(path);
    const inside = !isAbsolute(target) && !relative(root, resolve(dirname(path), target)).startsWith("..");
    if (inside) return [];
  }
  await unlink(path);
  return [relative(root, path)];
}

function ignoreMissing(error: NodeJS.ErrnoException): void {
  if (error.code !== "ENOENT") throw error;
}
