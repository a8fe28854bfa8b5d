/**
 * Rserve as the reference: a foreground Rserve in its own process group (killed as a group at the end,
 * even on error or Ctrl-C), and a minimal QAP1 client over node:net.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import net from "node:net";
import { ensureDebian } from "./debian.js";
import { connectLoopback, SocketReader } from "./socket-reader.js";

const ID_LENGTH = 32;
const HEADER = 16;
const CMD_EVAL = 0x003;
const DT_STRING = 4;
const RESP_OK = 0x10001;
const RESP_ERR = 0x10002;

export interface QapAnswer {
  /** Length of the response payload (bytes). */
  readonly length: number;
  readonly payload: Buffer;
}

/** One QAP1 connection: one request in flight at a time. */
export class QapClient {
  private readonly reader: SocketReader;

  private constructor(private readonly socket: net.Socket) {
    this.reader = new SocketReader(socket, "Rserve");
  }

  /** Connects and reads the 32-byte ID string (`Rsrv0103QAP1...`). */
  static async connect(port: number): Promise<QapClient> {
    const client = new QapClient(await connectLoopback(port));
    const id = (await client.reader.read(ID_LENGTH)).toString("latin1");
    if (!id.startsWith("Rsrv") || !id.includes("QAP1")) throw new Error(`not an Rserve QAP1 server: ${JSON.stringify(id)}`);
    return client;
  }

  /** CMD_eval with one DT_STRING parameter; resolves when the whole answer has arrived. */
  async eval(expression: string): Promise<QapAnswer> {
    const text = Buffer.from(expression, "utf8");
    const padded = (text.length + 1 + 3) & ~3; // NUL-terminated, padded to 4 bytes
    const message = Buffer.alloc(HEADER + 4 + padded);
    message.writeInt32LE(CMD_EVAL, 0);
    message.writeUInt32LE(4 + padded, 4);
    message.writeUInt32LE(DT_STRING | (padded << 8), HEADER);
    text.copy(message, HEADER + 4);
    this.socket.write(message);
    const header = await this.reader.read(HEADER);
    const cmd = header.readInt32LE(0);
    const length = header.readUInt32LE(4) + header.readUInt32LE(12) * 2 ** 32;
    const payload = length > 0 ? await this.reader.read(length) : Buffer.alloc(0);
    if (cmd !== RESP_OK) {
      const status = (cmd >>> 24) & 0x7f;
      throw new Error(
        (cmd & 0xffffff) === RESP_ERR
          ? `Rserve error status 0x${status.toString(16)} for ${expression}`
          : `unexpected Rserve response 0x${cmd.toString(16)}`,
      );
    }
    return { length, payload };
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (this.socket.destroyed) return resolve();
      this.socket.once("close", () => resolve());
      this.socket.end();
    });
  }
}

/** A free loopback port (bound then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

const live = new Set<number>();
process.on("exit", () => {
  for (const pgid of live) killGroup(pgid, "SIGKILL");
});

function killGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Rserve running in the foreground of its own process group; connections are forks of it. */
export class RserveProcess {
  private constructor(
    readonly port: number,
    private readonly child: ChildProcess,
    private log: string,
    private readonly dir: string,
  ) {}

  /** Starts Rserve with jsonlite loaded beforehand (so forks share it, as the R server process does). */
  static async start(timeoutMs = 20_000): Promise<RserveProcess> {
    // A fresh machine has none: installed here (as root), or the part stops saying why.
    const missing = await ensureDebian("Rserve", ["r-cran-rserve"]);
    if (missing) throw new Error(missing);
    const port = await freePort();
    // Rserve makes a working folder per connection (in /tmp/Rserv by default) and R its temporary
    // folder, which a killed R leaves: both go into a folder of the bench's, removed at the stop.
    const dir = await mkdtemp(join(tmpdir(), "rock-bench-rserve-"));
    const script = `suppressMessages(library(jsonlite)); Rserve::run.Rserve(port=${port}L, remote=FALSE, qap=TRUE, workdir=${JSON.stringify(join(dir, "Rserv"))})`;
    const child = spawn("Rscript", ["--no-save", "-e", script], {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, TMPDIR: dir },
    });
    if (child.pid === undefined) {
      await rm(dir, { recursive: true, force: true });
      throw new Error("could not spawn Rscript");
    }
    live.add(child.pid);
    const rs = new RserveProcess(port, child, "", dir);
    child.stdout?.on("data", (d: Buffer) => (rs.log += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (rs.log += d.toString()));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`Rserve exited (${child.exitCode}): ${rs.log}`);
      try {
        const c = await QapClient.connect(port);
        await c.close();
        return rs;
      } catch {
        if (Date.now() > deadline) {
          await rs.stop();
          throw new Error(`Rserve did not answer on port ${port}: ${rs.log}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** TERM to the whole group (Rserve and its forked connections), KILL after 3 s. */
  async stop(): Promise<void> {
    const pid = this.child.pid!;
    if (!live.has(pid)) return;
    const exited = new Promise<void>((resolve) =>
      this.child.exitCode !== null || this.child.signalCode !== null ? resolve() : this.child.once("exit", () => resolve()),
    );
    killGroup(pid, "SIGTERM");
    const timer = setTimeout(() => killGroup(pid, "SIGKILL"), 3000);
    await exited;
    clearTimeout(timer);
    killGroup(pid, "SIGKILL"); // forked children left in the group
    live.delete(pid);
    await rm(this.dir, { recursive: true, force: true });
  }
}
