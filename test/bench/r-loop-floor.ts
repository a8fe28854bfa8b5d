/**
 * The floor of a Node ↔ R hop: a bare R loop over a socket connection (readBin a length-prefixed
 * script, parse, eval, serialize, writeBin), with none of the session protocol. It tells what R's own
 * socket layer costs per round trip, against which the engine's hop and Rserve's C loop are read.
 * Asked for JSON, it answers the value as JSON text instead: a number as sprintf("%.15g") (what
 * jsonlite writes for it with digits = NA), anything else through jsonlite::toJSON, so that R's work
 * for `1+1` is the least a JSON answer needs, as it is in the server's R (worker.R's fast_json).
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import net from "node:net";
import { onCleanup } from "./cleanup.js";
import { SocketReader } from "./socket-reader.js";

const LOOP = `
con <- socketConnection("127.0.0.1", as.integer(commandArgs(TRUE)[1]), blocking = TRUE, open = "r+b", timeout = 3600)
json <- compiler::cmpfun(function(v) {
  if (is.double(v) && length(v) == 1L && is.null(attributes(v)) && is.finite(v)) sprintf("%.15g", v)
  else as.character(jsonlite::toJSON(v, auto_unbox = TRUE, null = "null", na = "null", digits = NA))
})
repeat {
  n <- readBin(con, "integer", 1L, size = 4L, endian = "big")
  if (length(n) == 0L) break
  frame <- readBin(con, "raw", n)
  v <- eval(parse(text = rawToChar(frame[-1L]), keep.source = FALSE)[[1L]], globalenv())
  v <- if (frame[1L] == as.raw(0x4a)) charToRaw(json(v)) else serialize(v, NULL)
  writeBin(c(as.raw(c(length(v) %/% 16777216, (length(v) %/% 65536) %% 256, (length(v) %/% 256) %% 256, length(v) %% 256)), v), con)
}`;

export class RLoopFloor {
  private constructor(
    private readonly socket: net.Socket,
    private readonly reader: SocketReader,
    readonly stop: () => Promise<void>,
  ) {}

  static async start(): Promise<RLoopFloor> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    const accepted = new Promise<net.Socket>((resolve) => server.once("connection", resolve));
    // Killed at the end, R cannot remove its temporary folder: it makes it in one of the bench's.
    const tmp = await mkdtemp(join(tmpdir(), "rock-bench-rloop-"));
    const r = spawn("Rscript", ["--vanilla", "-e", LOOP, String(port)], { stdio: "ignore", env: { ...process.env, TMPDIR: tmp } });
    const socket = await accepted;
    server.close();
    socket.setNoDelay(true);
    const stop = onCleanup(async () => {
      socket.destroy();
      if (r.exitCode === null && r.signalCode === null) {
        const exited = new Promise((resolve) => r.once("exit", resolve));
        r.kill("SIGKILL");
        await exited;
      }
      await rm(tmp, { recursive: true, force: true });
    });
    return new RLoopFloor(socket, new SocketReader(socket, "R loop"), stop);
  }

  /** Evaluates `script`; resolves with its value's R serialization, or its JSON text when `as` says so. */
  async eval(script: string, as: "rds" | "json" = "rds"): Promise<Buffer> {
    const text = Buffer.from(script, "utf8");
    const frame = Buffer.alloc(5 + text.length);
    frame.writeUInt32BE(1 + text.length, 0);
    frame[4] = as === "json" ? 0x4a : 0x52;
    text.copy(frame, 5);
    this.socket.write(frame);
    return this.reader.read((await this.reader.read(4)).readUInt32BE(0));
  }
}
