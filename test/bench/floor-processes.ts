/**
 * The bench's bare servers, each in a process of its own as the server under test is: the floors
 * of floor-server.ts and the bare file server of file-floor-server.ts.
 */
import { spawn } from "node:child_process";
import { onCleanup } from "./cleanup.js";
import type { FloorPorts } from "./floor-server.js";
import { ROOT } from "./server-process.js";

/** The bare file server (file-floor-server.ts) in a process of its own, serving `dir`. */
export async function startFileFloor(dir: string): Promise<{ port: number; url: string; pid: number; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ["--import", "tsx", "test/bench/file-floor-server.ts", dir], {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "inherit"],
  });
  child.stdin?.on("error", () => undefined);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = onCleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let out = "";
      child.stdout?.setEncoding("utf8");
      child.stdout?.on("data", (t: string) => {
        out += t;
        if (out.includes("\n")) resolve(Number(out.trim()));
      });
      child.once("exit", (code) => reject(new Error(`the bare file server exited (${code})`)));
    });
    return { port, url: `http://127.0.0.1:${port}`, pid: child.pid!, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** The bare floor servers (floor-server.ts) in a process of their own. */
export async function startFloors(): Promise<{ ports: FloorPorts; pid: number; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ["--import", "tsx", "test/bench/floor-server.ts"], {
    cwd: ROOT,
    detached: true,
    stdio: ["pipe", "pipe", "pipe"],
  });
  child.stdin?.on("error", () => undefined);
  let log = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (t: string) => (log = (log + t).slice(-4000)));
  const onExit = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  process.once("exit", onExit);
  const stop = onCleanup(async () => {
    process.off("exit", onExit);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once("exit", () => r()));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(timer);
  });
  try {
    const ports = await new Promise<FloorPorts>((resolve, reject) => {
      let out = "";
      const timer = setTimeout(() => reject(new Error(`floor servers did not start: ${log}`)), 30_000);
      child.stdout?.setEncoding("utf8");
      child.stdout?.on("data", (t: string) => {
        out += t;
        const nl = out.indexOf("\n");
        if (nl < 0) return;
        clearTimeout(timer);
        resolve(JSON.parse(out.slice(0, nl)) as FloorPorts);
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`floor servers exited (${code}): ${log}`));
      });
    });
    return { ports, pid: child.pid!, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
