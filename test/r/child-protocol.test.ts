import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import { RChild, type EvalEvent } from "../../src/r/process/child.js";
import { encodeFrame, FrameReader } from "../../src/r/wire/frames.js";
import { DRAIN, evalFrame } from "../../src/r/wire/protocol.js";
import { FROM_SESSION, lettersOf, MARKER, ONE_READ, TO_SESSION } from "../../src/r/wire/protocol-table.js";
import { until } from "./support.js";

/**
 * A process in R's stead, for RChild to signal: it writes `I` for each SIGINT it gets (and lives on), and
 * a SIGKILL (what RChild sends when the protocol breaks) ends it, not the test runner.
 */
class StandIn {
  private written = "";

  private constructor(private readonly proc: ChildProcess) {
    proc.stdout?.on("data", (chunk: Buffer) => (this.written += chunk.toString("latin1")));
  }

  static async start(): Promise<StandIn> {
    const script = "process.on('SIGINT', () => process.stdout.write('I')); process.stdout.write('R'); setInterval(() => {}, 1 << 30);";
    const standIn = new StandIn(spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] }));
    await until(() => standIn.written.startsWith("R"));
    return standIn;
  }

  get pid(): number {
    return this.proc.pid!;
  }

  get interrupts(): number {
    return this.written.split("I").length - 1;
  }

  async end(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise((resolve) => this.proc.once("exit", resolve));
    this.proc.kill("SIGKILL");
    await exited;
  }
}

/** An RChild connected over real loopback sockets to a peer that plays R, with a stand-in process as its pid. */
class PlayedR {
  private constructor(
    readonly child: RChild,
    readonly rMain: net.Socket,
    readonly rOut: net.Socket,
    readonly logged: string[],
    readonly standIn: StandIn,
    private readonly server: net.Server,
  ) {}

  static async start(): Promise<PlayedR> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    const accepted: net.Socket[] = [];
    const two = new Promise<void>((resolve) =>
      server.on("connection", (s) => {
        s.setNoDelay(true);
        if (accepted.push(s) === 2) resolve();
      }),
    );
    const rMain = net.connect(port, "127.0.0.1");
    await new Promise((r) => rMain.once("connect", r));
    const rOut = net.connect(port, "127.0.0.1");
    await two;
    rMain.setNoDelay(true);
    rOut.setNoDelay(true);
    const standIn = await StandIn.start();
    const logged: string[] = [];
    const child = new RChild(standIn.pid, accepted[0]!, accepted[1]!, (t) => logged.push(t));
    child.start(undefined, undefined);
    return new PlayedR(child, rMain, rOut, logged, standIn, server);
  }

  async stop(): Promise<void> {
    this.rMain.destroy();
    this.rOut.destroy();
    await new Promise((r) => this.server.close(r));
    await this.standIn.end();
  }
}

/**
 * The Node side of the session protocol against a peer that plays R over real loopback sockets, so
 * that chunk boundaries can be put exactly where R's writes may put them.
 */
describe("session protocol: output markers across chunk boundaries, live and quiet requests", () => {
  let played: PlayedR;
  let child: RChild;
  let rMain: net.Socket;
  let rOut: net.Socket;
  let logged: string[];

  before(async () => {
    played = await PlayedR.start();
    ({ child, rMain, rOut, logged } = played);
  });
  after(() => played.stop());

  const pause = () => new Promise((r) => setTimeout(r, 30));
  const nul = (type: number) => Buffer.from([0, type]);
  const live = (script: string) => evalFrame(Buffer.from(script), "json", true);
  /** A frame of one text field, as R writes a message or a JSON value. */
  const one = (letter: "M" | "T", text: string) => encodeFrame(letter, Buffer.from(`${text}\0`));

  it("restores the order of output, messages and the value when NUL and its type byte arrive apart", async () => {
    const events: EvalEvent[] = [];
    const outcome = child.run(live("x"), (e) => events.push(e));
    // R starts (marker), prints "a\x01b", then a message (marker + frame), prints "c", then ends
    // (marker + value frame).
    rOut.write(Buffer.concat([nul(2), Buffer.from("a\x01b"), nul(1).subarray(0, 1)]));
    await pause();
    rMain.write(one(FROM_SESSION.message.letter, "m\n"));
    await pause();
    rOut.write(Buffer.concat([nul(1).subarray(1), Buffer.from("c"), Buffer.from([0])]));
    await pause();
    rMain.write(one(FROM_SESSION.json.letter, "42"));
    await pause();
    rOut.write(Buffer.from([0]));
    const result = await outcome;
    expect(result).to.deep.equal({ ok: true, value: Buffer.from("42") });
    expect(events).to.deep.equal([
      { kind: "output", text: "a\x01b" },
      { kind: "message", text: "m\n" },
      { kind: "output", text: "c" },
    ]);
  });

  it("leaves bytes 1 and 2 of printed text alone", async () => {
    const events: EvalEvent[] = [];
    const outcome = child.run(live("y"), (e) => events.push(e));
    rOut.write(Buffer.concat([nul(2), Buffer.from("\x02\x01 printed\n")]));
    await pause();
    rOut.write(nul(0));
    rMain.write(one(FROM_SESSION.json.letter, "1"));
    expect(await outcome).to.deep.equal({ ok: true, value: Buffer.from("1") });
    expect(events.map((e) => e.text).join("")).to.equal("\x02\x01 printed\n");
  });

  it("answers a request that is not live without waiting for a marker; its output goes to the log", async () => {
    logged.length = 0;
    const outcome = child.run(evalFrame(Buffer.from("z"), "json"));
    rOut.write("quiet\n");
    await pause();
    rMain.write(one(FROM_SESSION.json.letter, "7"));
    expect(await outcome).to.deep.equal({ ok: true, value: Buffer.from("7") });
    expect(logged.join("")).to.equal("quiet\n");
  });

  it("streams only what a live request printed after its start marker", async () => {
    logged.length = 0;
    const events: EvalEvent[] = [];
    const outcome = child.run(live("w"), (e) => events.push(e));
    // The tail of what an earlier request printed arrives first, in the same chunk as the marker.
    rOut.write(Buffer.concat([Buffer.from("earlier\n"), nul(2), Buffer.from("mine\n"), nul(0)]));
    rMain.write(one(FROM_SESSION.json.letter, "1"));
    expect(await outcome).to.deep.equal({ ok: true, value: Buffer.from("1") });
    expect(events).to.deep.equal([{ kind: "output", text: "mine\n" }]);
    expect(logged.join("")).to.equal("earlier\nmine\n");
  });
});

describe("session protocol: interrupts and the drain frame", () => {
  /** R reads a socket 4096 bytes at a time (worker.R; its one_read is made from ONE_READ by npm run gen). */
  const R_READ = 4096;
  let played: PlayedR;
  /** What Node wrote on the main socket since the last `received`. */
  let sent: Buffer[] = [];

  before(async () => {
    played = await PlayedR.start();
    played.rMain.on("data", (chunk: Buffer) => sent.push(chunk));
  });
  after(() => played.stop());

  /** An evaluation request of exactly `bytes` bytes, header included. */
  const request = (bytes: number): Buffer => evalFrame(Buffer.alloc(bytes - evalFrame(Buffer.alloc(0), "json").length, " "), "json");
  /** The next `bytes` bytes Node wrote, as R would read them. */
  const received = async (bytes: number): Promise<Buffer> => {
    await until(() => Buffer.concat(sent).length >= bytes);
    const all = Buffer.concat(sent);
    sent = [];
    return all;
  };
  const answer = (): boolean => played.rMain.write(encodeFrame(FROM_SESSION.json.letter, Buffer.from("1\0")));
  const typesOf = (bytes: Buffer): string[] => new FrameReader(lettersOf(TO_SESSION)).push(bytes).map((f) => f.type);

  it("signals at once during a request R takes in one read, and sends the next behind a drain frame, both within one read", async () => {
    const first = request(ONE_READ);
    const outcome = played.child.run(first);
    await received(first.length);
    expect(played.child.interrupt()).to.equal(true);
    await until(() => played.standIn.interrupts === 1);
    answer();
    expect((await outcome).ok).to.equal(true);

    const second = played.child.run(request(ONE_READ));
    const bytes = await received(DRAIN.length + ONE_READ);
    expect(typesOf(bytes)).to.deep.equal([TO_SESSION.drain.letter, TO_SESSION.evalJson.letter]);
    expect(bytes.length).to.be.at.most(R_READ);
    answer();
    expect((await second).ok).to.equal(true);

    // Nothing was interrupted since: no drain frame.
    const third = played.child.run(request(100));
    expect(typesOf(await received(100))).to.deep.equal([TO_SESSION.evalJson.letter]);
    answer();
    expect((await third).ok).to.equal(true);
  });

  it("holds the signal during a larger request until R's START marker says R has read it all", async () => {
    const before = played.standIn.interrupts;
    const big = request(ONE_READ + 1);
    const outcome = played.child.run(big);
    await received(big.length);
    expect(played.child.interrupt()).to.equal(true);
    await new Promise((r) => setTimeout(r, 300));
    expect(played.standIn.interrupts, "no SIGINT before the START marker").to.equal(before);
    played.rOut.write(Buffer.from([0, MARKER.start]));
    await until(() => played.standIn.interrupts === before + 1);
    answer();
    expect((await outcome).ok).to.equal(true);

    const next = played.child.run(request(100));
    expect(typesOf(await received(DRAIN.length + 100))).to.deep.equal([TO_SESSION.drain.letter, TO_SESSION.evalJson.letter]);
    answer();
    expect((await next).ok).to.equal(true);
  });
});
