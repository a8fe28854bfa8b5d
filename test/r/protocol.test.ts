import { expect } from "chai";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  Answer,
  assignFrame,
  decodeAssign,
  decodeEval,
  decodeFork,
  decodeServerGreeting,
  decodeSessionGreeting,
  DRAIN,
  encodeFrame,
  evalFrame,
  FormatByte,
  forkFrame,
  FrameReader,
  FrameTooLargeError,
  Greeting,
  isLive,
  Marker,
  MAX_GREETING,
  MAX_GREETING_PAYLOAD,
  ONE_READ,
  Request,
  SourceByte,
  versionFrame,
  type Frame,
} from "../../src/r/protocol.js";

const only = (bytes: Buffer): Frame => {
  const frames = new FrameReader().push(bytes);
  expect(frames).to.have.length(1);
  return frames[0]!;
};

describe("protocol: requests", () => {
  it("round-trips an evaluation, live or not, in either format", () => {
    const script = Buffer.from("cat('é')\n1 + 1", "utf8");
    for (const live of [false, true]) {
      for (const format of ["json", "rds"] as const) {
        const frame = only(evalFrame(script, format, live));
        expect(frame.type).to.equal(live ? Request.live : Request.eval);
        expect(isLive(evalFrame(script, format, live))).to.equal(live);
        const decoded = decodeEval(frame);
        expect(decoded.live).to.equal(live);
        expect(decoded.format).to.equal(format);
        expect(decoded.script.equals(script)).to.equal(true);
      }
    }
  });

  it("round-trips an assignment of a script and of R serialization bytes", () => {
    const script = assignFrame("größe", { kind: "script", text: Buffer.from("1:10") });
    const decodedScript = decodeAssign(only(script).payload);
    expect(only(script).type).to.equal(Request.assign);
    expect(decodedScript.symbol).to.equal("größe");
    expect(decodedScript.source.kind).to.equal("script");
    if (decodedScript.source.kind === "script") expect(Buffer.from(decodedScript.source.text).toString()).to.equal("1:10");

    const bytes = Buffer.from([0x58, 0x0a, 0, 0, 0, 3]);
    const decodedData = decodeAssign(only(assignFrame("x", { kind: "rdata", bytes })).payload);
    expect(decodedData.symbol).to.equal("x");
    expect(decodedData.source.kind).to.equal("rdata");
    if (decodedData.source.kind === "rdata") expect(Buffer.from(decodedData.source.bytes).equals(bytes)).to.equal(true);

    const empty = decodeAssign(only(assignFrame("y", { kind: "script", text: Buffer.alloc(0) })).payload);
    expect(empty.symbol).to.equal("y");
  });

  it("round-trips a fork, with and without the isolation identity", () => {
    const plain = { token: "abc", workDir: "/data/s1/work", tmpDir: "/data/s1/tmp" };
    expect(only(forkFrame(plain)).type).to.equal(Request.fork);
    expect(decodeFork(only(forkFrame(plain)).payload)).to.deep.equal(plain);
    const isolated = { ...plain, identity: { uid: 70001, gid: 70001, memoryBytes: 2 ** 33, processes: 64, privateTmp: true, network: "none" as const, filesystem: "minimal" as const } };
    expect(decodeFork(only(forkFrame(isolated)).payload)).to.deep.equal(isolated);
    // worker.R reads the fields by position: token, work, tmp, then uid, gid, memory, processes, private tmp, network, filesystem.
    expect(only(forkFrame(isolated)).payload.toString().split("\0")).to.deep.equal(["abc", "/data/s1/work", "/data/s1/tmp", "70001", "70001", "8589934592", "64", "1", "none", "minimal"]);
  });

  it("encodes drain, ping and version requests", () => {
    expect(only(DRAIN)).to.deep.include({ type: Request.drain });
    expect(only(DRAIN).payload.length).to.equal(0);
    expect(only(versionFrame("rds")).payload.toString()).to.equal(FormatByte.rds);
    expect(only(versionFrame("json")).payload.toString()).to.equal(FormatByte.json);
  });
});

describe("protocol: greetings", () => {
  const frame = (type: string, text: string): Frame => ({ type, payload: Buffer.from(text) });

  it("decodes the R server's greeting, ready or failed", () => {
    expect(decodeServerGreeting(frame(Greeting.server, "tok\n4.3.2\n123"))).to.deep.equal({ ok: true, token: "tok", version: "4.3.2", pid: 123 });
    expect(decodeServerGreeting(frame(Answer.error, "tok\nno unix\npackage"))).to.deep.equal({ ok: false, token: "tok", error: "no unix\npackage" });
    expect(decodeServerGreeting(frame(Answer.error, "tok"))).to.deep.equal({ ok: false, token: "tok", error: "tok" });
    expect(decodeServerGreeting(frame(Greeting.main, "tok\n1"))).to.equal(undefined);
  });

  it("decodes a session's greetings", () => {
    expect(decodeSessionGreeting(frame(Greeting.main, "tok\n42"))).to.deep.equal({ socket: "main", token: "tok", pid: 42 });
    expect(decodeSessionGreeting(frame(Greeting.output, "tok"))).to.deep.equal({ socket: "output", token: "tok" });
    expect(decodeSessionGreeting(frame(Greeting.server, "tok\n1\n2"))).to.equal(undefined);
  });

  it("reads the first frame only and gives back the bytes after it", () => {
    const greeting = encodeFrame(Greeting.output, Buffer.from("tok"));
    const after = Buffer.from([0, Marker.start, 0x41, 0x42]);
    const reader = new FrameReader(MAX_GREETING_PAYLOAD);
    const bytes = Buffer.concat([greeting, after]);
    expect(reader.push(bytes.subarray(0, 6), 1)).to.deep.equal([]);
    const frames = reader.push(bytes.subarray(6), 1);
    expect(frames.map((f) => [f.type, f.payload.toString()])).to.deep.equal([[Greeting.output, "tok"]]);
    expect(reader.takeRest()?.equals(after)).to.equal(true);
    expect(reader.takeRest()).to.equal(undefined);
  });

  it("bounds a greeting to MAX_GREETING bytes, header included", () => {
    const largest = encodeFrame(Greeting.main, Buffer.alloc(MAX_GREETING_PAYLOAD, 0x61));
    expect(largest.length).to.equal(MAX_GREETING);
    expect(new FrameReader(MAX_GREETING_PAYLOAD).push(largest, 1)).to.have.length(1);
    const header = encodeFrame(Greeting.main, Buffer.alloc(MAX_GREETING_PAYLOAD + 1)).subarray(0, 5);
    expect(() => new FrameReader(MAX_GREETING_PAYLOAD).push(header, 1)).to.throw(FrameTooLargeError);
    // Without a limit the same header only waits for its payload.
    expect(new FrameReader().push(header)).to.deep.equal([]);
  });
});

describe("protocol: worker.R mirrors protocol.ts", () => {
  const worker = readFileSync(fileURLToPath(new URL("../../src/r/worker.R", import.meta.url)), "utf8");
  const snake = (name: string): string => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  const letters: Record<string, Record<string, string>> = {
    request: Request,
    answer: Answer,
    greeting: Greeting,
    format: FormatByte,
    source: SourceByte,
  };

  /** `name <- value` at the top of worker.R's local(), for the protocol's groups. */
  const defined = new Map<string, string>();
  for (const match of worker.matchAll(/^ {2}((?:request|answer|greeting|format|source|marker)_\w+) <- (.+)$/gm)) {
    expect(defined.has(match[1]!), `${match[1]} defined twice`).to.equal(false);
    defined.set(match[1]!, match[2]!);
  }

  it("names the same letters", () => {
    const expected = new Map<string, string>();
    for (const [group, values] of Object.entries(letters)) {
      for (const [key, letter] of Object.entries(values)) expected.set(`${group}_${snake(key)}`, JSON.stringify(letter));
    }
    for (const [key, value] of Object.entries(Marker)) expected.set(`marker_${snake(key)}`, `as.raw(c(0L, ${value}L))`);
    expect(Object.fromEntries(defined)).to.deep.equal(Object.fromEntries(expected));
  });

  it("reads a request in one read up to the same size", () => {
    expect(worker).to.match(new RegExp(`^ {2}one_read <- ${ONE_READ}L$`, "m"));
  });

  it("writes no frame letter outside those names", () => {
    // A letter written inline would escape the check above.
    const calls = worker.match(/(write_frame|send_marked|answer|failed)\([^)]*"[A-Z]"/g) ?? [];
    expect(calls).to.deep.equal([]);
    expect(worker).to.not.match(/frame\$type == "/);
  });
});
