/**
 * The floors of the eval round-trips, run by r-bench.ts in a process of their own (like the server
 * under test): a bare node:http server answering "2", a bare @grpc/grpc-js server and a bare
 * Connect-ES (connect-node, h2c) server answering GetSession, a bare node:http2 server answering
 * every call with one fixed GetSession message, and the architecture's own floor: a bare node:http
 * server relaying each request body, as a script, to a bare R loop of the connection's own and
 * answering what R sent back, the value's R serialization or, on `/json`, its JSON text
 * (client → Node → R → Node → client with no rock code in between). Prints their ports as one JSON
 * line on stdout; exits on SIGTERM/SIGINT or when stdin closes (the bench process is gone).
 */
import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo, Socket } from "node:net";
import * as grpc from "@grpc/grpc-js";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { create, toBinary } from "@bufbuild/protobuf";
import { GetSessionResponseSchema, RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { RServiceService, type RServiceServer } from "../../gen/grpc-js/rock/r/v1/rservice.js";
import { cleanupAll } from "./cleanup.js";
import { RLoopFloor } from "./r-loop-floor.js";

export interface FloorPorts {
  readonly http: number;
  readonly grpcJs: number;
  readonly connect: number;
  /** Bare node:http2, one fixed GetSession answer whatever the call. */
  readonly h2: number;
  /** Bare node:http relaying the body to a bare R loop, one per connection. */
  readonly relay: number;
}

const SUBJECT = "admin";

const listen = (server: http.Server | http2.Http2Server) =>
  new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port));
  });

const h1 = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  req.resume();
  req.once("end", () => res.writeHead(200, { "content-type": "application/json", "content-length": 1 }).end("2"));
});

const g = new grpc.Server();
const impl: Pick<RServiceServer, "getSession"> = {
  getSession: (req, cb) =>
    cb(null, { session: { id: req.request.id, subject: SUBJECT, busy: false, createdDate: "", lastAccessDate: "", suspended: false } }),
};
g.addService(RServiceService, impl);
const grpcJs = await new Promise<number>((resolve, reject) =>
  g.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
);

const h2 = http2.createServer(
  connectNodeAdapter({
    routes(router) {
      router.rpc(RService.method.getSession, (req) => ({ session: { id: req.id, subject: SUBJECT, busy: false } }));
    },
  }),
);

const answer = (() => {
  const body = toBinary(GetSessionResponseSchema, create(GetSessionResponseSchema, { session: { id: "floor", subject: SUBJECT } }));
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  frame.set(body, 5);
  return frame;
})();
const bareH2 = http2.createServer();
bareH2.on("stream", (stream) => {
  stream.resume();
  stream.once("end", () => {
    stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(answer);
  });
});

// One R loop per connection, as the server gives each session its own R process: the relay then
// serves several clients at once the way the server does (throughput-bench.ts). Loops are started
// ahead and handed back when a connection closes, as the server keeps spare sessions, so that no
// client waits for R to start.
const idleLoops: Promise<RLoopFloor>[] = Array.from({ length: 4 }, () => RLoopFloor.start());
const rLoops = new WeakMap<object, Promise<RLoopFloor>>();
const relay = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.once("end", () => {
    const rLoop = rLoops.get(req.socket);
    if (!rLoop) return void res.writeHead(500).end("no R loop for this connection");
    rLoop
      .then((loop) => loop.eval(Buffer.concat(chunks).toString("utf8"), req.url === "/json" ? "json" : "rds"))
      .then(
        (value) => res.writeHead(200, { "content-type": "application/json", "content-length": value.length }).end(value),
        (error: Error) => res.writeHead(500).end(error.message),
      );
  });
});
relay.on("connection", (socket: Socket) => {
  const loop = idleLoops.pop() ?? RLoopFloor.start();
  rLoops.set(socket, loop);
  socket.once("close", () => idleLoops.push(loop));
});

const ports: FloorPorts = {
  http: await listen(h1),
  grpcJs,
  connect: await listen(h2),
  h2: await listen(bareH2),
  relay: await listen(relay),
};
process.stdout.write(`${JSON.stringify(ports)}\n`);

const exit = () => void cleanupAll().finally(() => process.exit(0));
process.once("SIGTERM", exit);
process.once("SIGINT", exit);
process.stdin.on("end", exit);
process.stdin.on("close", exit);
process.stdin.resume();
