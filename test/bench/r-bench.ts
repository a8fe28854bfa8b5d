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
import {
  EvalRequestSchema,
  EvalResponseSchema,
  GetSessionRequestSchema,
  GetSessionResponseSchema,
  RService,
} from "../../gen/es/rock/r/v1/rservice_pb.js";
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
import { mbps, mib, ms, percent, perSecond, section, times, verdict, type Section } from "./report.js";
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

  private constructor(
    readonly server: ServerProcess,
    readonly raw: RawHttpClient,
  ) {
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
    const res = await this.rawGrpc.unary(
      "/rock.r.v1.RService/Eval",
      EvalRequestSchema,
      createMessage(EvalRequestSchema, { id, script: { contentType: RSCRIPT, data: Buffer.from(script) }, accept }),
      EvalResponseSchema,
    );
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
    const connectTimes: number[] = [];
    const rsCycleTimes: number[] = [];
    const rsCycle = async () => {
      const t = performance.now();
      const c = await QapClient.connect(port);
      connectTimes.push(performance.now() - t);
      await c.close();
      rsCycleTimes.push(performance.now() - t);
    };
    for (let i = 0; i < 5; i++) {
      await cycle();
      await rsCycle();
    }
    for (const samples of [createTimes, deleteTimes, connectTimes, rsCycleTimes]) samples.length = 0;
    // Interleaved rounds, as for the eval round trips: this VM's slow and fast minutes weigh on both.
    const sessionRounds = 10;
    for (let r = 0; r < sessionRounds; r++) {
      for (let i = 0; i < sessionsN / sessionRounds; i++) await cycle();
      for (let i = 0; i < sessionsN / sessionRounds; i++) await rsCycle();
    }
    // Bursts: sessions created back to back with none deleted until the burst ends (10: one user's
    // default limit); a pause between bursts, as between the demands of real clients, lets the server
    // fork its spare sessions again. Rserve's side keeps its connections open the same way.
    const burst = 10;
    const bursts = o.quick ? 3 : 10;
    const burstTimes: number[] = [];
    const rsBurstTimes: number[] = [];
    for (let b = 0; b < bursts; b++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      const ids: string[] = [];
      for (let i = 0; i < burst; i++) {
        const t = performance.now();
        ids.push(await ours.createSession());
        burstTimes.push(performance.now() - t);
      }
      for (const sid of ids) await ours.deleteSession(sid);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const conns: QapClient[] = [];
      for (let i = 0; i < burst; i++) {
        const t = performance.now();
        conns.push(await QapClient.connect(port));
        rsBurstTimes.push(performance.now() - t);
      }
      for (const c of conns) await c.close();
    }
    const create = summarize(createTimes);
    const del = summarize(deleteTimes);
    const both = summarize(createTimes.map((c, i) => c + deleteTimes[i]!));
    const rsConnect = summarize(connectTimes);
    const rsBoth = summarize(rsCycleTimes);
    const inBurst = summarize(burstTimes);
    const rsInBurst = summarize(rsBurstTimes);
    s.rows.push(
      {
        figure: "create p50, each then deleted",
        value: ms(create.p50),
        reference: `connect ${ms(rsConnect.p50)}`,
        ratio: ratio(create.p50, rsConnect.p50),
        target: "≤ 2× Rserve connect",
        verdict: verdict(create.p50 <= 2 * rsConnect.p50),
      },
      {
        figure: "create p95, each then deleted",
        value: ms(create.p95),
        reference: `connect ${ms(rsConnect.p95)}`,
        ratio: ratio(create.p95, rsConnect.p95),
      },
      {
        figure: `create p50, bursts of ${burst}`,
        value: ms(inBurst.p50),
        reference: `connect ${ms(rsInBurst.p50)}`,
        ratio: ratio(inBurst.p50, rsInBurst.p50),
        target: "≤ 2× Rserve connect",
        verdict: verdict(inBurst.p50 <= 2 * rsInBurst.p50),
      },
      {
        figure: `create p95, bursts of ${burst}`,
        value: ms(inBurst.p95),
        reference: `connect ${ms(rsInBurst.p95)}`,
        ratio: ratio(inBurst.p95, rsInBurst.p95),
      },
      { figure: "delete p50 / p95", value: `${ms(del.p50)} / ${ms(del.p95)}` },
      // A delete answers once every process of the session is gone; Rserve's close waits for nothing.
      {
        figure: "create + delete p50",
        value: ms(both.p50),
        reference: `connect+close ${ms(rsBoth.p50)}`,
        ratio: ratio(both.p50, rsBoth.p50),
        target: "≤ 2× Rserve connect+close",
        verdict: verdict(both.p50 <= 2 * rsBoth.p50),
      },
      {
        figure: "create + delete p95",
        value: ms(both.p95),
        reference: `connect+close ${ms(rsBoth.p95)}`,
        ratio: ratio(both.p95, rsBoth.p95),
      },
    );
    s.notes.push(
      `${sessionsN} create + delete cycles back to back after 5 warm-up, in ${sessionRounds} rounds interleaved with Rserve's; REST over one keep-alive socket; Rserve connect = TCP connect + 32-byte ID (its fork).`,
    );
    s.notes.push(
      `Bursts: ${bursts} × ${burst} creates back to back, 500 ms apart (the server's default r.spareSessions keeps 8 sessions forked ahead; past them a creation waits for a fork).`,
    );
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
    if (rdsRest.length < 30 || !rdsRserve.includes(rdsRest.subarray(0, 14)))
      throw new Error("REST R serialization does not look like serialize(1+1)");
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
      h2FloorTime = await measure(() =>
        h2Floor.unary(
          "/rock.r.v1.RService/GetSession",
          GetSessionRequestSchema,
          createMessage(GetSessionRequestSchema, { id }),
          GetSessionResponseSchema,
        ),
      );
      h2Floor.close();
    } catch (error) {
      await floors.stop();
      throw error;
    }
    const relayFloor = await RawHttpClient.connect(floors.ports.relay, USER);
    expectText((await relayFloor.request("POST", "/", { "Content-Type": RSCRIPT }, JSON_1)).body, "2", "the relay floor's JSON");
    const rLoop = await RLoopFloor.start();
    if (!(await rLoop.eval("1+1")).equals(rdsRest)) throw new Error("the bare R loop's serialize(1+1) differs from the engine's");
    const getSession = createMessage(GetSessionRequestSchema, { id });
    const m = await sampleInterleaved(
      {
        restNoR: () => ours.http.ok("GET", `/r/session/${id}`),
        grpcNoR: () => call((cb) => ours.grpc.r.getSession({ id }, metadataFor(USER), cb)),
        connectGrpcNoR: () => ours.connectGrpc.getSession({ id }),
        rawGrpcNoR: () =>
          ours.rawGrpc.unary("/rock.r.v1.RService/GetSession", GetSessionRequestSchema, getSession, GetSessionResponseSchema),
        rsPlain: () => qap.eval("1+1"),
        rsJson: () => qap.eval(JSON_1),
        rsRds: () => qap.eval(RDS_1),
        rLoop: () => rLoop.eval("1+1"),
        relayJson: () => relayFloor.request("POST", "/", { "Content-Type": RSCRIPT }, JSON_1),
        relayRds: () => relayFloor.request("POST", "/", { "Content-Type": RSCRIPT }, "1+1"),
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
    ).finally(() => {
      relayFloor.close();
      return Promise.all([rLoop.stop(), floors.stop()]);
    });
    const {
      relayJson,
      relayRds,
      restNoR,
      grpcNoR,
      connectGrpcNoR,
      rawGrpcNoR,
      rLoop: rLoopTime,
      rsPlain,
      rsJson,
      rsRds,
      rawRestJson,
      restJson,
      grpcJson,
      connectGrpcJson,
      connectJson,
      restRds,
      rawGrpcRds,
      grpcRds,
      connectGrpcRds,
    } = m;

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
    row("JSON REST (minimal HTTP/1.1 client)", rawRestJson, rsJson, "Rserve toJSON", 1.3);
    row("JSON REST (node:http client)", restJson, rsJson, "Rserve toJSON");
    row("JSON gRPC (grpc-js)", grpcJson, rsJson, "Rserve toJSON");
    row("JSON gRPC (Connect-ES)", connectGrpcJson, rsJson, "Rserve toJSON");
    row("JSON Connect", connectJson, rsJson, "Rserve toJSON");
    row("RDS REST (node:http client)", restRds, rsRds, "Rserve serialize");
    row("RDS gRPC (minimal node:http2 client)", rawGrpcRds, rsRds, "Rserve serialize", 2);
    row("RDS gRPC (grpc-js)", grpcRds, rsRds, "Rserve serialize");
    row("RDS gRPC (Connect-ES)", connectGrpcRds, rsRds, "Rserve serialize");
    const floor = (figure: string, x: Summary, what: string) =>
      e.rows.push({ figure: `${figure} p50 / p95`, value: `${ms(x.p50)} / ${ms(x.p95)}`, reference: what });
    floor("Rserve plain 1+1", rsPlain, "(QAP1 floor)");
    floor("floor: bare R socket loop, serialize(1+1)", rLoopTime, "(R's socket layer, no protocol)");
    // The design's own floor (R behind Node): what the JSON and RDS targets can be read against.
    e.rows.push({
      figure: "floor: bare node:http → bare R loop, toJSON(1+1), minimal client p50",
      value: ms(relayJson.p50),
      reference: `Rserve toJSON ${ms(rsJson.p50)}`,
      ratio: ratio(relayJson.p50, rsJson.p50),
    });
    e.rows.push({
      figure: "floor: bare node:http → bare R loop, serialize(1+1), minimal client p50",
      value: ms(relayRds.p50),
      reference: `Rserve serialize ${ms(rsRds.p50)}`,
      ratio: ratio(relayRds.p50, rsRds.p50),
    });
    floor("floor: bare node:http, minimal client", rawHttpFloorTime, "(no edge, no R)");
    floor("floor: bare node:http, node:http client", httpFloorTime, "(no edge, no R)");
    floor("floor: REST GET /r/session/{id}, node:http client", restNoR, "(edge + auth, no R)");
    floor("floor: bare node:http2 gRPC answer, minimal client", h2FloorTime, "(no Connect, no R)");
    floor("floor: bare grpc-js server, GetSession", grpcFloorTime, "(grpc-js both sides, no work)");
    floor("floor: bare Connect-ES h2c server, GetSession", connectFloorTime, "(Connect-ES gRPC both sides, no work)");
    floor("floor: gRPC GetSession, minimal client", rawGrpcNoR, "(h2 + unary fast path + auth, no R)");
    floor("floor: gRPC GetSession (grpc-js)", grpcNoR, "(h2 + auth, no R)");
    floor("floor: gRPC GetSession (Connect-ES)", connectGrpcNoR, "(h2 + auth, no R)");
    e.notes.push(
      `${iterations} iterations after ${warmup} warm-up, in 10 interleaved rounds (every row of rock and Rserve takes 1/10 of its samples per round); REST: a minimal HTTP/1.1 client (one write per request, answer read by Content-Length) and node:http, one keep-alive socket each; gRPC: a minimal node:http2 client (hand-framed messages), @grpc/grpc-js and Connect-ES createGrpcTransport (all h2c, one HTTP/2 connection each); Connect: Connect-ES, HTTP/1.1.`,
    );
    e.notes.push(
      "The server (node src/main.ts), Rserve and the bare floor servers each run in a process of their own; the clients run in this one.",
    );
    e.notes.push(`Rserve JSON = ${JSON_1}; Rserve RDS = ${RDS_1}.`);
    e.notes.push(
      `The design puts R behind Node (client → Node → R → Node → client): with no rock code at all, a bare node:http server relaying to a bare R loop answers at ${ratio(relayJson.p50, rsJson.p50)} Rserve's JSON eval and ${ratio(relayRds.p50, rsRds.p50)} its serialized eval; rock's REST JSON eval is ${ratio(rawRestJson.p50, relayJson.p50)} that floor.`,
    );
    sections.push(e);

    // ---- concurrency ----
    o.log("R: 4 concurrent sessions…");
    const perLane = o.quick ? 200 : 1000;
    const lanes = 4;
    const t = section(`R throughput: eval 1+1 as JSON over REST, ${lanes} sessions concurrently vs 1`);
    const clients = Array.from({ length: lanes }, () => new HttpClient(server.port, USER));
    const raws: RawHttpClient[] = [];
    try {
      for (let l = 0; l < lanes; l++) raws.push(await RawHttpClient.connect(server.port, USER));
      const ids = await Promise.all(clients.map((c) => ours.createSession(c)));
      for (let l = 0; l < lanes; l++) qaps.push(await QapClient.connect(port));
      const rawEval = async (l: number) => {
        const a = await raws[l]!.request(
          "POST",
          `/r/session/${ids[l]}/_eval`,
          { "Content-Type": RSCRIPT, Accept: "application/json" },
          "1+1",
        );
        if (a.status !== 200) throw new Error(`eval answered ${a.status}`);
      };
      const kinds = {
        raw: rawEval,
        http: (l: number) => ours.restEval(ids[l]!, "1+1", "application/json", clients[l]!),
        rserve: (l: number) => qaps[1 + l]!.eval(JSON_1),
      };
      // The spares these sessions took are forked again before anything is measured.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      for (const work of Object.values(kinds)) for (let l = 0; l < lanes; l++) for (let i = 0; i < 20; i++) await work(l);
      // CPU (user + system, from /proc) of the server process, of the R processes of its sessions and
      // of this process (the clients): where the time goes, and whether a process saturates a core.
      const { processes } = await import("../support/procfs.js");
      const { cpuSeconds } = await import("../../src/r/confine/processes.js");
      const rServer = processes().find((p) => p.ppid === server.pid && p.pgrp === p.pid);
      const rPids = processes()
        .filter((p) => rServer !== undefined && p.pgrp === rServer.pid)
        .map((p) => p.pid);
      const cpuOf = async (pids: number[]) => (await Promise.all(pids.map(cpuSeconds))).reduce<number>((a, b) => a + (b ?? 0), 0);
      interface Tally {
        evals: number;
        ms: number;
        server: number;
        r: number;
        client: number;
      }
      const tally = (): Tally => ({ evals: 0, ms: 0, server: 0, r: 0, client: 0 });
      const add = (into: Tally, x: Tally) => {
        for (const k of ["evals", "ms", "server", "r", "client"] as const) into[k] += x[k];
      };
      const rate = (x: Tally) => (x.evals / x.ms) * 1000;
      const run = async (into: Tally, n: number, per: number, work: (lane: number) => Promise<unknown>) => {
        const [server0, r0, client0] = [await cpuOf([server.pid]), await cpuOf(rPids), process.cpuUsage()];
        const start = performance.now();
        await concurrentRate(n, per, work);
        into.ms += performance.now() - start;
        into.evals += n * per;
        into.server += (await cpuOf([server.pid])) - server0;
        into.r += (await cpuOf(rPids)) - r0;
        const client = process.cpuUsage(client0);
        into.client += (client.user + client.system) / 1e6;
      };
      // Interleaved rounds, 1 lane then 4 lanes of each client in turn: a slow minute of this VM
      // weighs on every figure alike instead of on whichever block it falls in.
      const rounds = 10;
      const one = { raw: tally(), http: tally(), rserve: tally() };
      const four = { raw: tally(), http: tally(), rserve: tally() };
      const paired = { raw: [] as number[], http: [] as number[], rserve: [] as number[] };
      for (let r = 0; r < rounds; r++) {
        for (const kind of ["raw", "http", "rserve"] as const) {
          const [a, b] = [tally(), tally()];
          await run(a, 1, (perLane * 2) / rounds, kinds[kind]);
          await run(b, lanes, perLane / rounds, kinds[kind]);
          paired[kind].push(rate(b) / rate(a));
          add(one[kind], a);
          add(four[kind], b);
        }
      }
      const share = (seconds: number, x: Tally) => `${((seconds / (x.ms / 1000)) * 100).toFixed(0)}%`;
      const cores = (x: Tally) => `server ${share(x.server, x)}, R ${share(x.r, x)}, clients ${share(x.client, x)}`;
      // Each round's 4 lanes against the 1 lane just before them: the median of these pairs is what a
      // burst of load from elsewhere on the machine, landing on one side of one pair, does not move.
      const scaling = (kind: "raw" | "http" | "rserve") => summarize(paired[kind]).p50;
      const spread = (kind: "raw" | "http" | "rserve") =>
        `${times(rate(four[kind]) / rate(one[kind]))} pooled, ${times(Math.min(...paired[kind]))}–${times(Math.max(...paired[kind]))} by round`;
      t.rows.push(
        {
          figure: "1 session (minimal client)",
          value: perSecond(rate(one.raw)),
          reference: `Rserve 1 conn ${perSecond(rate(one.rserve))}`,
          ratio: ratio(rate(one.raw), rate(one.rserve)),
        },
        {
          figure: `${lanes} sessions (minimal client)`,
          value: perSecond(rate(four.raw)),
          reference: `Rserve ${lanes} conns ${perSecond(rate(four.rserve))}`,
          ratio: ratio(rate(four.raw), rate(four.rserve)),
        },
        {
          figure: `scaling ${lanes} vs 1 (minimal client), median of ${rounds} rounds`,
          value: times(scaling("raw")),
          reference: `Rserve ${times(scaling("rserve"))}`,
          target: "≥ 1.8×",
          verdict: verdict(scaling("raw") >= 1.8),
        },
        { figure: `scaling ${lanes} vs 1 (minimal client), spread`, value: spread("raw"), reference: `Rserve ${spread("rserve")}` },
        { figure: `1 / ${lanes} sessions (node:http client)`, value: `${perSecond(rate(one.http))} / ${perSecond(rate(four.http))}` },
        {
          figure: `scaling ${lanes} vs 1 (node:http client), median`,
          value: times(scaling("http")),
          reference: `Rserve ${times(scaling("rserve"))}`,
        },
        { figure: "CPU, 1 session (minimal client)", value: cores(one.raw), reference: "of one core" },
        { figure: `CPU, ${lanes} sessions (minimal client)`, value: cores(four.raw), reference: "of one core" },
        { figure: `CPU, ${lanes} sessions (node:http client)`, value: cores(four.http), reference: "of one core" },
      );
      t.notes.push(
        `${lanes} lanes × ${perLane} evals, each lane its own session and keep-alive socket (1 lane: ${perLane * 2}), in ${rounds} rounds interleaving 1 and ${lanes} lanes of each client; ${(await import("node:os")).cpus().length} CPU cores.`,
      );
      t.notes.push(
        "The server runs in its own process, the clients (minimal HTTP/1.1 client, node:http, QAP1) in this one. CPU is user + system time from /proc over the measured time: the server process, the R processes of its sessions, and this process.",
      );
      for (const sid of ids) await ours.deleteSession(sid);
    } finally {
      for (const c of clients) c.close();
      for (const c of raws) c.close();
    }
    sections.push(t);

    // ---- large JSON ----
    o.log("R: 100,000-row data.frame as JSON…");
    const df = "set.seed(1); df <- data.frame(a=1:1e5, b=rnorm(1e5), c=sample(letters,1e5,TRUE)); NULL";
    const dfJson = "jsonlite::toJSON(df, auto_unbox=TRUE, null='null', na='null', digits=NA)";
    await ours.restEval(id, df, "application/json");
    await qap.eval(df);
    const runs = o.quick ? 3 : 11;
    let size = 0;
    // The REST answer and R's own toJSON time in turns: this VM's speed moves by a third from one
    // minute to the next, and the transport is their difference.
    const restDf: number[] = [];
    const inRDf: number[] = [];
    await ours.restEval(id, "df", "application/json");
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      size = (await ours.restEval(id, "df", "application/json")).length;
      restDf.push(performance.now() - t0);
      inRDf.push(Number((await ours.restEval(id, `system.time(${dfJson})[["elapsed"]]`, "application/json")).toString()) * 1000);
    }
    const oursDf = summarize(restDf);
    const inR = summarize(inRDf).p50;
    let rsSize = 0;
    const rsDf = summarize(await sample(runs, 1, async () => (rsSize = (await qap.eval(dfJson)).length)));
    const transport = oursDf.p50 - inR;
    const d = section("R: JSON of a 100,000-row data.frame (eval of the assigned symbol)");
    d.rows.push(
      {
        figure: "REST eval `df` → JSON (median)",
        value: ms(oursDf.p50),
        reference: `Rserve toJSON ${ms(rsDf.p50)}`,
        ratio: ratio(oursDf.p50, rsDf.p50),
      },
      { figure: "toJSON inside the session (system.time, median)", value: ms(inR), reference: "(R cost alone)" },
      {
        figure: "transport: REST answer - R alone",
        value: ms(transport),
        reference: `${percent(transport / inR)} of R`,
        target: "transport ≤ 20% of R",
        verdict: verdict(transport <= 0.2 * inR),
      },
      { figure: "JSON size", value: mib(size), reference: `Rserve answer ${mib(rsSize)}` },
    );
    d.notes.push(
      `${runs} runs after 1 warm-up, the REST eval and system.time(toJSON) in the session taking turns; data.frame(a=1:1e5, b=rnorm(1e5), c=sample(letters,1e5,TRUE)).`,
    );
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
  const rounds = o.quick ? 1 : 3;
  o.log(`R: files, ${mib(bytes)} upload/download vs cp and a bare node:http server (${rounds} rounds)…`);
  const dir = await mkdtemp(join(tmpdir(), "rock-bench-files-"));
  const removeDir = onCleanup(() => rm(dir, { recursive: true, force: true }));
  const http = new HttpClient(ours.server.port, USER);
  const floor = await startFileFloor(dir);
  const floorHttp = new HttpClient(floor.port, USER);
  try {
    const src = join(dir, "big.bin");
    const block = randomBytes(1024 * 1024);
    await pipeline(
      Readable.from(
        (function* () {
          for (let n = 0; n < bytes; n += block.length) yield block;
        })(),
      ),
      createWriteStream(src),
    );
    const MB = bytes / 1e6;
    const rateOf = async (work: () => Promise<unknown>) => {
      const t = performance.now();
      await work();
      return MB / ((performance.now() - t) / 1000);
    };

    const boundary = `----rockbench${randomBytes(8).toString("hex")}`;
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
    );
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const upload = async (client: HttpClient, path: string) => {
      const body = Readable.from(
        (async function* () {
          yield head;
          yield* createReadStream(src, { highWaterMark: 1024 * 1024 });
          yield tail;
        })(),
      );
      return client.ok("POST", path, {
        headers: { "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": head.length + bytes + tail.length },
        body,
      });
    };
    const dst = join(dir, "download.bin");
    // Written as cp writes, in large blocks: a 16 KiB write buffer (the default) would make every
    // 64 KiB network chunk wait for its own write, and measure the client.
    const download = async (client: HttpClient, path: string) => {
      const res = await client.open("GET", path);
      if (res.statusCode !== 200) throw new Error(`download answered ${res.statusCode}`);
      await pipeline(res, createWriteStream(dst, { highWaterMark: 4 * 1024 * 1024 }));
      const got = (await stat(dst)).size;
      if (got !== bytes) throw new Error(`downloaded ${got} bytes, expected ${bytes}`);
      await rm(dst);
    };

    const rss = () => ours.server.rss();
    const baseline = rss();
    /** Rate of `work` and the growth of the server's RSS during it (peak - just before). */
    const watched = async (work: () => Promise<unknown>) => {
      const before = rss();
      const sampler = new PeakSampler(rss, 50);
      const rate = await rateOf(work);
      return { rate, growth: sampler.stop() - before };
    };
    const cp: number[] = [],
      up: number[] = [],
      down: number[] = [],
      floorUp: number[] = [],
      floorDown: number[] = [];
    let upGrowth = 0,
      downGrowth = 0;
    for (let r = 0; r < rounds; r++) {
      cp.push(await rateOf(() => run("cp", [src, join(dir, "copy.bin")])));
      await rm(join(dir, "copy.bin"));
      floorUp.push(await rateOf(() => upload(floorHttp, "/")));
      await rm(join(dir, "floor-upload.bin"));
      const u = await watched(async () => {
        const a = await upload(http, `/r/session/${id}/_upload?path=big.bin`);
        const size = Number((JSON.parse(a.body.toString("utf8")) as { size: number | string }).size);
        if (size !== bytes) throw new Error(`upload stored ${size} bytes, expected ${bytes}`);
      });
      up.push(u.rate);
      upGrowth = Math.max(upGrowth, u.growth);
      floorDown.push(await rateOf(() => download(floorHttp, "/?path=big.bin")));
      const d = await watched(() => download(http, `/r/session/${id}/_download?path=big.bin`));
      down.push(d.rate);
      downGrowth = Math.max(downGrowth, d.growth);
      // The next round uploads to a free name again, as the bare server does.
      await ours.restEval(id, 'unlink("big.bin"); NULL', "application/json");
    }
    const median = (xs: number[]) => summarize(xs).p50;
    const [cpRate, upRate, downRate] = [median(cp), median(up), median(down)];
    const refs = (bare: number[]) => `cp ${mbps(cpRate)}; bare node:http ${mbps(median(bare))} (${times(median(bare) / cpRate)})`;

    const f = section(`R files: ${mib(bytes)} multipart upload / streamed download over REST vs cp`);
    const limit = 64 * 1024 * 1024;
    f.rows.push(
      {
        figure: "upload",
        value: mbps(upRate),
        reference: refs(floorUp),
        ratio: ratio(upRate, cpRate),
        target: "≥ 0.8× cp",
        verdict: verdict(upRate >= 0.8 * cpRate),
      },
      {
        figure: "download",
        value: mbps(downRate),
        reference: refs(floorDown),
        ratio: ratio(downRate, cpRate),
        target: "≥ 0.8× cp",
        verdict: verdict(downRate >= 0.8 * cpRate),
      },
      { figure: "RSS baseline", value: mib(baseline) },
      { figure: "RSS growth, upload (largest)", value: `+${mib(upGrowth)}`, target: `< ${mib(limit)}`, verdict: verdict(upGrowth < limit) },
      {
        figure: "RSS growth, download (largest)",
        value: `+${mib(downGrowth)}`,
        target: `< ${mib(limit)}`,
        verdict: verdict(downGrowth < limit),
      },
    );
    f.notes.push(
      `Medians of ${rounds} rounds; each round runs cp, then the bare server's upload and the server's, then both downloads. MB = 10^6 bytes; the source file is in the page cache for cp and for the uploads; every transfer writes a new file, as cp does.`,
    );
    f.notes.push(
      "bare node:http = test/bench/file-floor-server.ts in its own process: busboy to a file, and 1 MiB reads to the socket, with no auth, checks, staging or uid: what node:http itself costs here.",
    );
    f.notes.push(
      "RSS = VmRSS of the server process (/proc/<pid>/status, every 50 ms), R sessions not included; growth = peak during a transfer - just before it.",
    );
    return f;
  } finally {
    http.close();
    floorHttp.close();
    await floor.stop();
    await removeDir();
  }
}

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
async function startFloors(): Promise<{ ports: FloorPorts; stop: () => Promise<void> }> {
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
