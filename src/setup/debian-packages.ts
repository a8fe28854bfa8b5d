import { spawn } from "node:child_process";
import { onPath } from "../r/confine/on-path.js";
import { SetupError } from "./setup-error.js";

export { onPath };

/** apt can install Debian packages here: this process is root and apt-get is on PATH. */
export function canInstallDebianPackages(): boolean {
  return process.getuid?.() === 0 && onPath("apt-get");
}

/**
 * Installs `packages` with apt (no recommended packages), saying first which and why; throws SetupError
 * with apt's last words when it fails.
 */
export async function installDebianPackages(packages: readonly string[], why: string, progress: (line: string) => void): Promise<void> {
  if (!canInstallDebianPackages()) {
    throw new SetupError(
      `the Debian package${packages.length > 1 ? "s" : ""} ${packages.join(" ")} ${packages.length > 1 ? "are" : "is"} needed ${why}: install ${packages.length > 1 ? "them" : "it"} as root (apt-get install ${packages.join(" ")})`,
    );
  }
  progress(`installing Debian package${packages.length > 1 ? "s" : ""} ${packages.join(" ")} (${why}) with apt-get`);
  await apt(["update", "-qq"]);
  await apt(["install", "-y", "-qq", "--no-install-recommends", ...packages]);
}

function apt(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("apt-get", args, { env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const take = (chunk: Buffer): void => {
      output = (output + chunk.toString("utf8")).slice(-8192);
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.once("error", (e) => reject(new SetupError(`apt-get could not be run: ${e.message}`)));
    child.once("close", (code) => {
      if (code === 0) return resolve();
      const last = output.trim().split("\n").filter(Boolean).slice(-2).join(" / ");
      reject(new SetupError(`apt-get ${args.join(" ")} failed (exit ${code}): ${last}`));
    });
  });
}
