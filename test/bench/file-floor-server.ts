/**
 * The floor of the file transfers, run by r-bench.ts and transfers-bench.ts in a process of its own
 * (like the server under test): a bare node:http server that stores a multipart upload's file part
 * with busboy, as the server does, and answers a download by streaming the file in 1 MiB reads. No
 * auth, no checks, no staging, no uid. Usage: file-floor-server.ts <folder>; a multipart `POST /`
 * stores its file part in `<folder>/floor-upload.bin`, a `PUT /` (or a POST of any other type) stores
 * its body there as it comes (what `curl -T` sends, the counterpart of a WebDAV PUT), `GET
 * /?path=<name>` sends `<folder>/<name>`. Prints its port on stdout; exits when stdin closes (the
 * bench process is gone) or on SIGTERM.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { createReadStream, createWriteStream } from "node:fs";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import busboy from "busboy";

const folder = process.argv[2];
if (!folder) throw new Error("usage: file-floor-server.ts <folder>");

const server = http.createServer((req, res) => {
  const fail = (e: unknown) => {
    if (!res.headersSent) res.writeHead(500).end(String(e));
    else res.destroy();
  };
  const target = join(folder, "floor-upload.bin");
  if (req.method === "PUT" || (req.method === "POST" && !/^multipart\/form-data/i.test(req.headers["content-type"] ?? ""))) {
    pipeline(req, createWriteStream(target, { highWaterMark: 4 << 20 })).then(() => res.writeHead(200).end("ok"), fail);
    return;
  }
  if (req.method === "POST") {
    const bb = busboy({ headers: req.headers });
    const stored: Promise<unknown>[] = [];
    bb.on("file", (_name, file) => stored.push(pipeline(file, createWriteStream(target, { highWaterMark: 4 << 20 }))));
    bb.once("close", () => Promise.all(stored).then(() => res.writeHead(200).end("ok"), fail));
    bb.once("error", fail);
    req.pipe(bb);
    return;
  }
  const name = new URL(req.url ?? "/", "http://floor").searchParams.get("path") ?? "";
  res.writeHead(200, { "content-type": "application/octet-stream" });
  pipeline(createReadStream(join(folder, name), { highWaterMark: 1 << 20 }), res).catch(fail);
});

server.listen(0, "127.0.0.1", () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
const stop = () => process.exit(0);
process.stdin.on("end", stop).resume();
process.once("SIGTERM", stop);
