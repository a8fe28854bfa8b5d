import { spawn } from "node:child_process";

/** The uid/gid an isolated session's files belong to. */
export interface Owner {
  readonly uid: number;
  readonly gid: number;
}

/**
 * Runs a file command as `owner`; rejects with what it printed on stderr. Moves into an isolated
 * session's folders run as the session's own uid, so the kernel decides what they reach: the session
 * owns those folders and could swap a checked path for a symlink to anywhere between the service's
 * check and its use, which a root process would follow.
 */
export function runAs(owner: Owner, command: string, args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      uid: owner.uid,
      gid: owner.gid,
      env: { PATH: "/usr/bin:/bin" },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (text: string) => (stderr = (stderr + text).slice(-2000)));
    child.once("error", reject);
    child.once("close", (code) => (code === 0 ? resolve() : reject(new Error(stderr.trim() || `${command} exited with ${code}`))));
  });
}
