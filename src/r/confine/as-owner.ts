import { spawn } from "node:child_process";
import { PassThrough, type Readable } from "node:stream";

/** The uid/gid an isolated session's files belong to. */
export interface Owner {
  readonly uid: number;
  readonly gid: number;
}

/**
 * File operations in an isolated session's folders run as the session's own uid, so the kernel
 * decides what they reach: the session owns those folders and could swap a checked path for a
 * symlink to anywhere between the service's check and its use, which a root process would follow.
 */
function spawnAs(owner: Owner, command: string, args: readonly string[], stdout: "pipe" | "ignore") {
  return spawn(command, args, { uid: owner.uid, gid: owner.gid, env: { PATH: "/usr/bin:/bin" }, stdio: ["ignore", stdout, "pipe"] });
}

/** Runs a file command as `owner`; rejects with what it printed on stderr. */
export function runAs(owner: Owner, command: string, args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawnAs(owner, command, args, "ignore");
    let stderr = "";
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (text: string) => (stderr = (stderr + text).slice(-2000)));
    child.once("error", reject);
    child.once("close", (code) => (code === 0 ? resolve() : reject(new Error(stderr.trim() || `${command} exited with ${code}`))));
  });
}

/**
 * The bytes of `path` as `owner` reads them. The stream ends only once the reader exited well: a
 * read that failed is an error, never a shorter file.
 */
export function readAs(owner: Owner, path: string): Readable {
  const child = spawnAs(owner, "cat", ["--", path], "pipe");
  child.stderr!.resume();
  const out = new PassThrough();
  child.stdout!.pipe(out, { end: false });
  child.once("error", (error) => out.destroy(error));
  child.once("close", (code) => (code === 0 ? out.end() : out.destroy(new Error(`${path} could not be read`))));
  // A download the client left: the reader goes too.
  out.once("close", () => child.kill("SIGKILL"));
  return out;
}
