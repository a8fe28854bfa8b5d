/**
 * The R service against Rserve, each in its own process and both measured from this Node process:
 * session creation, eval round-trips (JSON and R serialization, over REST, gRPC and Connect),
 * concurrency, a large JSON answer, and 1 GB file transfers against `cp`.
 */
import { spawn } from "node:child_process";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { randomBytes } from "node:crypto";
import type { Client } from "@connectrpc/connect";
import { create as createMessage } from "@bufbuild/protobuf";
import { EvalRequestSchema, EvalResponseSchema, GetSessionRequestSchema, GetSessionResponseSchema, RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import * as grpc from "@grpc/grpc-js";
import { RServiceClient, type EvalRequest, type EvalResponse } from "../../gen/grpc-js/rock/r/v1/rservice.js";
import { call, connectClient, grpcClients, metadataFor } from "../support/clients.js";
import { onCleanup } from "./cleanup.js";
import type { FloorPorts } from "./floor-server.js";
import { ROOT, startServerProcess, type ServerProcess } from "./server-process.js";
import { HttpClient } from "./http-client.js";
import { RawGrpcClient } from "./raw-grpc-client.js";
import { RawHttpClient } from "./raw-http-client.js";
import { RLoopFloor } from "./r-loop-floor.js";
import { QapClient, RserveProcess } from "./rserve-client.js";
import { mbps, mib, ms, perSecond, section, times, verdict, type Section } from "./report.js";
import { concurrentRate, PeakSampler, sample, sampleInterleaved, summarize, type Summary } from "./stats.js";

export interface RBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

const JSON_1 = "jsonlite::toJSON(1+1, auto_unbox=TRUE, null='null', na='null', digits=NA)";
const RDS_1 = "serialize(1+1, NULL)";
const RSCRIPT = "application/x-rscript";
const OCTET = "application/octet-stream";
const USER = "admin";

const ratio = (ours: number, ref: number) => times(ours / ref);

interface SessionJson {
  readonly id: string;
}

/** The rock side: the server process and this process's clients of it. */
class Ours {
  readonly http: HttpClient;
  readonly grpc: ReturnType<typeof grpcClients>;
  readonly connect: Client<typeof RService>;
  /** Connect-ES over the gRPC protocol (HTTP/2 h2c). */
  readonly connectGrpc: Client<typeof RService>;
  readonly rawGrpc: RawGrpcClient;
  private readonly md = metadataFor(USER);

  private constructor(readonly server: ServerProcess, readonly raw: RawHttpClient) {
    this.http = new HttpClient(server.port, USER);
    this.grpc = grpcClients(server.port);
    this.connect = connectClient(RService, server.port, "connect", USER);
    this.connectGrpc = connectClient(RService, server.port, "grpc", USER);
    this.rawGrpc = new RawGrpcClient(server.port, USER);
  }

  static async of(server: ServerProcess): Promise<Ours> {
    return new Ours(server, await RawHttpClient.connect(server.port, USER));
  }

  async createSession(http = this.http): Promise<string> {
    const a = await http.ok("POST", "/r/sessions", {}, 201);
    return (JSON.parse(a.body.toString("utf8")) as SessionJson).id;
  }

  async deleteSession(id: string, http = this.http): Promise<void> {
    await http.ok("DELETE", `/r/session/${id}`);
  }

  async restEval(id: string, script: string, accept: string, http = this.http): Promise<Buffer> {
    const a = await http.request("POST", `/r/session/${id}/_eval`, { headers: { "content-type": RSCRIPT, accept }, body: script });
    if (a.status !== 200) throw new Error(`eval answered ${a.status}: ${a.body.toString("utf8", 0, 300)}`);
    return a.body;
  }

  /** Eval over REST with the minimal HTTP/1.1 client. */
  async rawRestEval(id: string, script: string, accept: string): Promise<Buffer> {
    const a = await this.raw.request("POST", `/r/session/${id}/_eval`, { "Content-Type": RSCRIPT, Accept: accept }, script);
    if (a.status !== 200) throw new Error(`eval answered ${a.status}: ${a.body.toString("utf8", 0, 300)}`);
    return a.body;
  }

  /** Eval over gRPC with the minimal node:http2 client. */
  async rawGrpcEval(id: string, script: string, accept: string): Promise<Uint8Array> {
    const res = await this.rawGrpc.unary("/rock.r.v1.RService/Eval", EvalRequestSchema, createMessage(EvalRequestSchema, { id, script: { contentType: RSCRIPT, data: Buffer.from(script) }, accept }), EvalResponseSchema);
    if (res.answer.case !== "value") throw new Error("gRPC eval: no value");
    return res.answer.value.data;
  }

  async grpcEval(id: string, script: string, accept: string): Promise<Uint8Array> {
    const req: EvalRequest = { id, async: false, script: { contentType: RSCRIPT, data: Buffer.from(script), extensions: [] }, accept };
    const res = await call<EvalResponse>((cb) => this.grpc.r.eval(req, this.md, cb));
    if (!res.value) throw new Error("gRPC eval: no value");
    return res.value.data;
  }

  async connectEval(id: string, script: string, accept: string, client = this.connect): Promise<Uint8Array> {
    const res = await client.eval({ id, script: { contentType: RSCRIPT, data: Buffer.from(script) }, accept });
    if (res.answer.case !== "value") throw new Error("Connect eval: no value");
    return res.answer.value.data;
  }

  /** Eval over gRPC with the Connect-ES client (createGrpcTransport, h2c). */
  connectGrpcEval(id: string, script: string, accept: string): Promise<Uint8Array> {
    return this.connectEval(id, script, accept, this.connectGrpc);
  }

  close(): void {
    this.http.close();
    this.grpc.close();
    this.raw.close();
    this.rawGrpc.close();
  }
}

function expectText(got: Uint8Array, want: string, what: string): void {
  const text = Buffer.from(got).toString("utf8");
  if (text !== want) throw new Error(`${what}: expected ${JSON.stringify(want)}, got ${JSON.stringify(text.slice(0, 100))}`);
}

export async function runRBench(o: RBenchOptions): Promise<Section[]> {
  const iterations = o.quick ? 200 : 2000;
  const warmup = o.quick ? 50 : 200;
  const sessionsN = o.quick ? 30 : 300;
  const sections: Section[] = [];

  o.log("R: starting the server process (R on boot) and Rserve…");
  const server = await startServerProcess({ rStart: true });
  const stopServer = server.stop;
  let stopRserve: (() => Promise<void>) | undefined;
  const qaps: QapClient[] = [];
  const ours = await Ours.of(server);
  try {
    const rserve = await RserveProcess.start();
    stopRserve = onCleanup(() => rserve.stop());
    const port = rserve.port;
    const qap = await QapClient.connect(port);
    qaps.push(qap);

    // ---- sessions ----
    o.log("R: session creation…");
    const s = section("R sessions: REST POST /r/sessions (+ DELETE) vs Rserve connect (+ close)");
    const createTimes: number[] = [];
    const deleteTimes: number[] = [];
    const cycle = async () => {
      let t = performance.now();
      const id = await ours.createSession();
      createTimes.push(performance.now() - t);
      t = performance.now();
      await ours.deleteSession(id);
      deleteTimes.push(performance.now() - t);
    };
    for (let i = 0; i < 5; i++) await cycle();
    createTimes.length = 0;
    deleteTimes.length = 0;
    for (let i = 0; i < sessionsN; i++) await cycle();
    const connectTimes: number[] = [];
    const rsCycle = await sample(sessionsN, 5, async () => {
      const t = performance.now();
      const c = await QapClient.connect(port);
      connectTimes.push(performance.now() - t);
      await c.close();
    });
    const create = summarize(createTimes);
    const del = summarize(deleteTimes);
    const both = summarize(createTimes.map((c, i) => c + deleteTimes[i]!));
    const rsConnect = summarize(connectTimes.slice(5));
    const rsBoth = summarize(rsCycle);
    s.rows.push(
      { figure: "create p50", value: ms(create.p50), reference: `connect ${ms(rsConnect.p50)}`, ratio: ratio(create.p50, rsConnect.p50), target: "≤ 10 ms", verdict: verdict(create.p50 <= 10) },
      { figure: "create p95", value: ms(create.p95), reference: `connect ${ms(rsConnect.p95)}`, ratio: ratio(create.p95, rsConnect.p95) },
      { figure: "delete p50 / p95", value: `${ms(del.p50)} / ${ms(del.p95)}` },
      { figure: "create + delete p50", value: ms(both.p50), reference: `connect+close ${ms(rsBoth.p50)}`, ratio: ratio(both.p50, rsBoth.p50) },
      { figure: "create + delete p95", value: ms(both.p95), reference: `connect+close ${ms(rsBoth.p95)}`, ratio: ratio(both.p95, rsBoth.p95) },
    );
    s.notes.push(`${sessionsN} cycles after 5 warm-up; REST over one keep-alive socket; Rserve connect = TCP connect + 32-byte ID (its fork).`);
    sections.push(s);

    // ---- eval round-trips ----
    o.log(`R: eval round-trips (${iterations} each)…`);
    const id = await ours.createSession();
    expectText(await ours.rawRestEval(id, "1+1", "application/json"), "2", "REST JSON (minimal client)");
    expectText(await ours.restEval(id, "1+1", "application/json"), "2", "REST JSON");
    expectText(await ours.grpcEval(id, "1+1", "application/json"), "2", "gRPC JSON");
    expectText(await ours.connectEval(id, "1+1", "application/json"), "2", "Connect JSON");
    expectText(await ours.connectGrpcEval(id, "1+1", "application/json"), "2", "Connect-ES gRPC JSON");
    const rdsRest = await ours.restEval(id, "1+1", OCTET);
    const rdsRserve = (await qap.eval(RDS_1)).payload;
    if (rdsRest.length < 30 || !rdsRserve.includes(rdsRest.subarray(0, 14))) throw new Error("REST R serialization does not look like serialize(1+1)");
    if (!Buffer.from(await ours.rawGrpcEval(id, "1+1", OCTET)).equals(rdsRest)) throw new Error("gRPC R serialization differs from REST's");

    const measure = (work: () => Promise<unknown>) => sample(iterations, warmup, work).then(summarize);
    const floors = await startFloors();
    let httpFloorTime: Summary, rawHttpFloorTime: Summary, grpcFloorTime: Summary, connectFloorTime: Summary, h2FloorTime: Summary;
    try {
      const floorClient = new HttpClient(floors.ports.http, USER);
      httpFloorTime = await measure(() => floorClient.request("POST", "/", { headers: { "content-type": RSCRIPT }, body: "1+1" }));
      floorClient.close();
      const rawFloor = await RawHttpClient.connect(floors.ports.http, USER);
      rawHttpFloorTime = await measure(() => rawFloor.request("POST", "/", { "Content-Type": RSCRIPT }, "1+1"));
      rawFloor.close();
      const grpcJsFloor = new RServiceClient(`127.0.0.1:${floors.ports.grpcJs}`, grpc.credentials.createInsecure());
      grpcFloorTime = await measure(() => call((cb) => grpcJsFloor.getSession({ id }, metadataFor(USER), cb)));
      grpcJsFloor.close();
      const connectFloor = connectClient(RService, floors.ports.connect, "grpc", USER);
      connectFloorTime = await measure(() => connectFloor.getSession({ id }));
      const h2Floor = new RawGrpcClient(floors.ports.h2, USER);
      h2FloorTime = await measure(() => h2Floor.unary("/rock.r.v1.RService/GetSession", GetSessionRequestSchema, createMessage(GetSessionRequestSchema, { id }), GetSessionResponseSchema));
      h2Floor.close();
    } finally {
      await floors.stop();
    }
    const rLoop = await RLoopFloor.start();
    if (!(await rLoop.eval("1+1")).equals(rdsRest)) throw new Error("the bare R loop's serialize(1+1) differs from the engine's");
    const getSession = createMessage(GetSessionRequestSchema, { id });
    const m = await sampleInterleaved(
      {
        restNoR: () => ours.http.ok("GET", `/r/session/${id}`),
        grpcNoR: () => call((cb) => ours.grpc.r.getSession({ id }, metadataFor(USER), cb)),
        connectGrpcNoR: () => ours.connectGrpc.getSession({ id }),
        rawGrpcNoR: () => ours.rawGrpc.unary("/rock.r.v1.RService/GetSession", GetSessionRequestSchema, getSession, GetSessionResponseSchema),
        rsPlain: () => qap.eval("1+1"),
        rsJson: () => qap.eval(JSON_1),
        rsRds: () => qap.eval(RDS_1),
        rLoop: () => rLoop.eval("1+1"),
        rawRestJson: () => ours.rawRestEval(id, "1+1", "application/json"),
        restJson: () => ours.restEval(id, "1+1", "application/json"),
        grpcJson: () => ours.grpcEval(id, "1+1", "application/json"),
        connectGrpcJson: () => ours.connectGrpcEval(id, "1+1", "application/json"),
        connectJson: () => ours.connectEval(id, "1+1", "application/json"),
        restRds: () => ours.restEval(id, "1+1", OCTET),
        rawGrpcRds: () => ours.rawGrpcEval(id, "1+1", OCTET),
        grpcRds: () => ours.grpcEval(id, "1+1", OCTET),
        connectGrpcRds: () => ours.connectGrpcEval(id, "1+1", OCTET),
      },
      iterations,
      warmup,
    ).finally(rLoop.stop);
    const { restNoR, grpcNoR, connectGrpcNoR, rawGrpcNoR, rLoop: rLoopTime, rsPlain, rsJson, rsRds, rawRestJson, restJson, grpcJson, connectGrpcJson, connectJson, restRds, rawGrpcRds, grpcRds, connectGrpcRds } = m;

    const e = section("R eval round-trip of 1+1 (one session / one Rserve connection, sequential)");
    const row = (figure: string, x: Summary, ref: Summary, refName: string, factor?: number) => {
      e.rows.push({
        figure: `${figure} p50`,
        value: ms(x.p50),
        reference: `${refName} ${ms(ref.p50)}`,
        ratio: ratio(x.p50, ref.p50),
        ...(factor ? { target: `≤ ${factor}× Rserve`, verdict: verdict(x.p50 <= factor * ref.p50) } : {}),
      });
      e.rows.push({ figure: `${figure} p95`, value: ms(x.p95), reference: `${refName} ${ms(ref.p95)}`, ratio: ratio(x.p95, ref.p95) });
    };
    // The targets are on the minimal clients, the counterparts of the minimal QAP1 client; the
    // library clients are measured beside them.
    row("JSON REST (minimal HTTP/1.1 client)", rawRestJson, rsJson, "Rserve toJSON", 1.5);
    row("JSON REST (node:http client)", restJson, rsJson, "Rserve toJSON");
    row("JSON gRPC (grpc-js)", grpcJson, rsJson, "Rserve toJSON");
    row("JSON gRPC (Connect-ES)", connectGrpcJson, rsJson, "Rserve toJSON");
    row("JSON Connect", connectJson, rsJson, "Rserve toJSON");
    row("RDS REST (node:http client)", restRds, rsRds, "Rserve serialize");
    row("RDS gRPC (minimal node:http2 client)", rawGrpcRds, rsRds, "Rserve serialize", 2);
    row("RDS gRPC (grpc-js)", grpcRds, rsRds, "Rserve serialize");
    row("RDS gRPC (Connect-ES)", connectGrpcRds, rsRds, "Rserve serialize");
    const floor = (figure: string, x: Summary, what: string) => e.rows.push({ figure: `${figure} p50 / p95`, value: `${ms(x.p50)} / ${ms(x.p95)}`, reference: what });
    floor("Rserve plain 1+1", rsPlain, "(QAP1 floor)");
    floor("floor: bare R socket loop, serialize(1+1)", rLoopTime, "(R's socket layer, no protocol)");
    floor("floor: bare node:http, minimal client", rawHttpFloorTime, "(no edge, no R)");
    floor("floor: bare node:http, node:http client", httpFloorTime, "(no edge, no R)");
    floor("floor: REST GET /r/session/{id}, node:http client", restNoR, "(edge + auth, no R)");
    floor("floor: bare node:http2 gRPC answer, minimal client", h2FloorTime, "(no Connect, no R)");
    floor("floor: bare grpc-js server, GetSession", grpcFloorTime, "(grpc-js both sides, no work)");
    floor("floor: bare Connect-ES h2c server, GetSession", connectFloorTime, "(Connect-ES gRPC both sides, no work)");
    floor("floor: gRPC GetSession, minimal client", rawGrpcNoR, "(h2 + Connect + auth, no R)");
    floor("floor: gRPC GetSession (grpc-js)", grpcNoR, "(h2 + auth, no R)");
    floor("floor: gRPC GetSession (Connect-ES)", connectGrpcNoR, "(h2 + auth, no R)");
    e.notes.push(`${iterations} iterations after ${warmup} warm-up, in 10 interleaved rounds (every row of rock and Rserve takes 1/10 of its samples per round); REST: a minimal HTTP/1.1 client (one write per request, answer read by Content-Length) and node:http, one keep-alive socket each; gRPC: a minimal node:http2 client (hand-framed messages), @grpc/grpc-js and Connect-ES createGrpcTransport (all h2c, one HTTP/2 connection each); Connect: Connect-ES, HTTP/1.1.`);
    e.notes.push("The server (node src/main.ts), Rserve and the bare floor servers each run in a process of their own; the clients run in this one.");
    e.notes.push(`Rserve JSON = ${JSON_1}; Rserve RDS = ${RDS_1}.`);
    sections.push(e);

    // ---- concurrency ----
    o.log("R: 4 concurrent sessions…");
    const perLane = o.quick ? 200 : 1000;
    const lanes = 4;
    const t = section(`R throughput: eval 1+1 as JSON over REST, ${lanes} sessions concurrently vs 1`);
    const clients = Array.from({ length: lanes }, () => new HttpClient(server.port, USER));
    try {
      const ids = await Promise.all(clients.map((c) => ours.createSession(c)));
      for (let l = 0; l < lanes; l++) for (let i = 0; i < 20; i++) await ours.restEval(ids[l]!, "1+1", "application/json", clients[l]!);
      const one = await concurrentRate(1, perLane * 2, () => ours.restEval(ids[0]!, "1+1", "application/json", clients[0]!));
      const four = await concurrentRate(lanes, perLane, (l) => ours.restEval(ids[l]!, "1+1", "application/json", clients[l]!));
      for (let l = 0; l < lanes; l++) qaps.push(await QapClient.connect(port));
      const rsOne = await concurrentRate(1, perLane * 2, () => qaps[1]!.eval(JSON_1));
      const rsFour = await concurrentRate(lanes, perLane, (l) => qaps[1 + l]!.eval(JSON_1));
      t.rows.push(
        { figure: "1 session", value: perSecond(one), reference: `Rserve 1 conn ${perSecond(rsOne)}`, ratio: ratio(one, rsOne) },
        { figure: `${lanes} sessions`, value: perSecond(four), reference: `Rserve ${lanes} conns ${perSecond(rsFour)}`, ratio: ratio(four, rsFour) },
        { figure: `scaling ${lanes} vs 1`, value: times(four / one), reference: `Rserve ${times(rsFour / rsOne)}` },
      );
      t.notes.push(`${lanes} lanes × ${perLane} evals, each lane its own session and keep-alive socket (1 lane: ${perLane * 2}); ${(await import("node:os")).cpus().length} CPU cores; the server runs in its own process.`);
      for (const sid of ids) await ours.deleteSession(sid);
    } finally {
      clients.forEach((c) => c.close());
    }
    sections.push(t);

    // ---- large JSON ----
    o.log("R: 100,000-row data.frame as JSON…");
    const df = "set.seed(1); df <- data.frame(a=1:1e5, b=rnorm(1e5), c=sample(letters,1e5,TRUE)); NULL";
    const dfJson = "jsonlite::toJSON(df, auto_unbox=TRUE, null='null', na='null', digits=NA)";
    await ours.restEval(id, df, "application/json");
    await qap.eval(df);
    const runs = o.quick ? 2 : 5;
    let size = 0;
    const oursDf = summarize(await sample(runs, 1, async () => (size = (await ours.restEval(id, "df", "application/json")).length)));
    let rsSize = 0;
    const rsDf = summarize(await sample(runs, 1, async () => (rsSize = (await qap.eval(dfJson)).length)));
    const inR = Number((await ours.restEval(id, `system.time(for (i in 1:${runs}) ${dfJson})[["elapsed"]] / ${runs}`, "application/json")).toString()) * 1000;
    const d = section("R: JSON of a 100,000-row data.frame (eval of the assigned symbol)");
    d.rows.push(
      { figure: "REST eval `df` → JSON (median)", value: ms(oursDf.p50), reference: `Rserve toJSON ${ms(rsDf.p50)}`, ratio: ratio(oursDf.p50, rsDf.p50) },
      { figure: "toJSON inside the session (system.time)", value: ms(inR), reference: "(R cost alone)" },
      { figure: "REST answer vs R alone", value: ms(oursDf.p50 - inR), reference: "overhead", ratio: ratio(oursDf.p50, inR) },
      { figure: "JSON size", value: mib(size), reference: `Rserve answer ${mib(rsSize)}` },
    );
    d.notes.push(`${runs} runs after 1 warm-up each; data.frame(a=1:1e5, b=rnorm(1e5), c=sample(letters,1e5,TRUE)).`);
    sections.push(d);

    // ---- files ----
    sections.push(await fileBench(o, ours, id));
    await ours.deleteSession(id);
  } finally {
    for (const q of qaps) await q.close().catch(() => {});
    ours.close();
    await stopRserve?.();
    await stopServer();
  }
  return sections;
}

async function fileBench(o: RBenchOptions, ours: Ours, id: string): Promise<Section> {
  const bytes = (o.quick ? 100 : 1024) * 1024 * 1024;
  o.log(`R: files, ${mib(bytes)} upload/download vs cp…`);
  const dir = await mkdtemp(join(tmpdir(), "rock-bench-files-"));
  const removeDir = onCleanup(() => rm(dir, { recursive: true, force: true }));
  const http = new HttpClient(ours.server.port, USER);
  try {
    const src = join(dir, "big.bin");
    const block = randomBytes(1024 * 1024);
    await pipeline(
      Readable.from((function* () {
        for (let n = 0; n < bytes; n += block.length) yield block;
      })()),
      createWriteStream(src),
    );
    const MB = bytes / 1e6;
    const secondsOf = async (work: () => Promise<unknown>) => {
      const t = performance.now();
      await work();
      return (performance.now() - t) / 1000;
    };
    const cpSeconds = await secondsOf(() => run("cp", [src, join(dir, "copy.bin")]));
    await rm(join(dir, "copy.bin"));

    const boundary = "----rockbench" + randomBytes(8).toString("hex");
    const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const rss = () => ours.server.rss();
    const baseline = rss();

    let sampler = new PeakSampler(rss, 50);
    let uploaded: { path: string; size: string | number } | undefined;
    const upSeconds = await secondsOf(async () => {
      const body = Readable.from((async function* () {
        yield head;
        yield* createReadStream(src, { highWaterMark: 1024 * 1024 });
        yield tail;
      })());
      const a = await http.ok("POST", `/r/session/${id}/_upload?path=big.bin&overwrite=true`, {
        headers: { "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": head.length + bytes + tail.length },
        body,
      });
      uploaded = JSON.parse(a.body.toString("utf8")) as { path: string; size: string | number };
    });
    const upPeak = sampler.stop();
    if (Number(uploaded?.size) !== bytes) throw new Error(`upload stored ${uploaded?.size} bytes, expected ${bytes}`);

    const dst = join(dir, "download.bin");
    const before = rss();
    sampler = new PeakSampler(rss, 50);
    const downSeconds = await secondsOf(async () => {
      const res = await http.open("GET", `/r/session/${id}/_download?path=big.bin`);
      if (res.statusCode !== 200) throw new Error(`download answered ${res.statusCode}`);
      await pipeline(res, createWriteStream(dst));
    });
    const downPeak = sampler.stop();
    const got = (await stat(dst)).size;
    if (got !== bytes) throw new Error(`downloaded ${got} bytes, expected ${bytes}`);

    const f = section(`R files: ${mib(bytes)} multipart upload / streamed download over REST vs cp`);
    const cpRate = MB / cpSeconds;
    const limit = Math.max(bytes / 4, 64 * 1024 * 1024);
    f.rows.push(
      { figure: "upload", value: mbps(MB / upSeconds), reference: `cp ${mbps(cpRate)}`, ratio: ratio(MB / upSeconds, cpRate) },
      { figure: "download", value: mbps(MB / downSeconds), reference: `cp ${mbps(cpRate)}`, ratio: ratio(MB / downSeconds, cpRate) },
      { figure: "RSS baseline", value: mib(baseline) },
      { figure: "RSS peak, upload", value: mib(upPeak), reference: `+${mib(upPeak - baseline)}`, target: `+ < ${mib(limit)}`, verdict: verdict(upPeak - baseline < limit) },
      { figure: "RSS peak, download", value: mib(downPeak), reference: `+${mib(downPeak - before)} (from ${mib(before)})`, target: `+ < ${mib(limit)}`, verdict: verdict(downPeak - before < limit) },
    );
    f.notes.push("MB = 10^6 bytes; the file is in the page cache for cp and for the upload; RSS = VmRSS of the server process (/proc/<pid>/status, every 50 ms), R sessions not included; baselines taken just before each transfer.");
    f.notes.push("The RSS target (growth < max(1/4 of the file, 64 MiB)) is this suite's own criterion for 'streamed, not buffered'.");
    return f;
  } finally {
    http.close();
    await removeDir();
  }
}

/** The bare floor servers (floor-server.ts) in a process of their own. */
async function startFloors(): Promise<{ ports: FloorPorts; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ["--import", "tsx", "test/bench/floor-server.ts"], { cwd: ROOT, detached: true, stdio: ["pipe", "pipe", "pipe"] });
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
    return { ports, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: "ignore" });
    p.once("error", reject);
    p.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}`))));
  });
}
