/**
 * The floor of a Node ↔ R hop: a bare R loop over a socket connection (readBin a length-prefixed
 * script, parse, eval, serialize, writeBin), with none of the session protocol. It tells what R's own
 * socket layer costs per round trip, against which the engine's hop and Rserve's C loop are read.
 * A value that is text (what jsonlite::toJSON returns) is answered as its bytes, so the same loop
 * stands for a JSON eval.
 */
import { spawn } from "node:child_process";
import net from "node:net";
import { onCleanup } from "./cleanup.js";
import { SocketReader } from "./socket-reader.js";

const LOOP = `
con <- socketConnection("127.0.0.1", as.integer(commandArgs(TRUE)[1]), blocking = TRUE, open = "r+b", timeout = 3600)
repeat {
  n <- readBin(con, "integer", 1L, size = 4L, endian = "big")
  if (length(n) == 0L) break
  v <- eval(parse(text = rawToChar(readBin(con, "raw", n)), keep.source = FALSE)[[1L]], globalenv())
  v <- if (is.character(v)) charToRaw(v) else serialize(v, NULL)
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
    const r = spawn("Rscript", ["--vanilla", "-e", LOOP, String(port)], { stdio: "ignore" });
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
    });
    return new RLoopFloor(socket, new SocketReader(socket, "R loop"), stop);
  }

  /** Evaluates `script`; resolves with its R serialization, or its text. */
  async eval(script: string): Promise<Buffer> {
    const text = Buffer.from(script, "utf8");
    const frame = Buffer.alloc(4 + text.length);
    frame.writeUInt32BE(text.length, 0);
    text.copy(frame, 4);
    this.socket.write(frame);
    return this.reader.read((await this.reader.read(4)).readUInt32BE(0));
  }
}
