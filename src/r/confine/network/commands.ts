import { spawn } from "node:child_process";

/** What the network's commands need on PATH, with the Debian package of each. */
export const NETWORK_COMMANDS = [
  { command: "nft", debian: "nftables" },
  { command: "ip", debian: "iproute2" },
  { command: "nsenter", debian: "util-linux" },
  { command: "unshare", debian: "util-linux" },
] as const;

/**
 * Runs `command` with `input` on its stdin; rejects with what it printed on stderr (its name and
 * arguments first, so that a refusal says which step failed).
 */
export function run(command: string, args: readonly string[], input = ""): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      stdio: ["pipe", "pipe", "pipe"],
      env: { PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr = (stderr + text).slice(-4000)));
    child.stdin.on("error", () => undefined);
    child.stdin.end(input);
    child.once("error", (e) => reject(new Error(`${command}: ${e.message}`)));
    child.once("close", (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`${[command, ...args].join(" ")}: ${stderr.trim() || `exited with ${code}`}`)),
    );
  });
}
