import { expect } from "chai";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { decodeFields, onlyField } from "../../src/r/wire/fields.js";
import { encodeFrame, FrameReader, MAX_GREETING, MAX_GREETING_PAYLOAD, ProtocolError } from "../../src/r/wire/frames.js";
import { FROM_SERVER, FROM_SESSION, lettersOf, MARKER, type FrameSpec } from "../../src/r/wire/protocol-table.js";
import { DIRECTIONS } from "../tools/r-protocol.js";

describe("protocol: the table", () => {
  it("gives each frame a letter of its own: no letter means two things", () => {
    const frames = Object.entries(DIRECTIONS).flatMap(([direction, { frames }]) =>
      Object.entries<FrameSpec>(frames).map(([name, spec]) => ({ frame: `${direction}.${name}`, letter: spec.letter })),
    );
    const byLetter = new Map<string, string[]>();
    for (const { frame, letter } of frames) byLetter.set(letter, [...(byLetter.get(letter) ?? []), frame]);
    expect([...byLetter].filter(([, names]) => names.length > 1)).to.deep.equal([]);
    expect(frames.filter(({ letter }) => !/^[A-Za-z]$/.test(letter))).to.deep.equal([]);
  });

  it("is the only place the worker's R takes a letter from: it reads gen/r/protocol.R, and no frame type is a letter written inline in any of its files", () => {
    const read = (file: string): string => readFileSync(fileURLToPath(new URL(`../../src/r/process/${file}`, import.meta.url)), "utf8");
    const worker = read("worker.R");
    expect(worker, "worker.R reads the generated constants").to.match(/sys\.source\(commandArgs\(trailingOnly = TRUE\)\[1L\]/);
    // Every R file of the worker: worker.R and the files it reads as its trailing arguments (rserver.ts).
    const files = [
      "worker.R",
      ...readdirSync(fileURLToPath(new URL("../../src/r/process", import.meta.url))).filter((f) => f.endsWith(".R") && f !== "worker.R"),
    ];
    expect(files).to.include.members(["worker.R", "session-state.R", "session-loop.R"]);
    const rserver = read("rserver.ts");
    for (const file of files.filter((f) => f !== "worker.R"))
      expect(rserver, `rserver.ts hands worker.R ${file}`).to.include(`src/r/process/${file}"`);
    // A type compared with a letter, or a letter handed to what writes a frame.
    const inline = /(==|!=)\s*"[A-Za-z]"|(write_frame|send_marked|frame_bytes|frame_header)\([^)]*"[A-Za-z]"/g;
    for (const file of files) expect(read(file).match(inline) ?? [], file).to.deep.equal([]);
    expect('write_frame(ctl, "K", text_field(child$pid))'.match(inline)).to.have.length(1);
  });
});

describe("protocol: reading R's frames", () => {
  const field = (text: string): Buffer => Buffer.from(`${text}\0`);

  it("decodes fields by the table: text, whole numbers and bytes, the last ending with the payload", () => {
    expect(decodeFields(FROM_SERVER.ready, Buffer.concat([field("tok"), field("4.3.2"), field("123")]))).to.deep.equal({
      token: "tok",
      version: "4.3.2",
      pid: 123,
    });
    expect(decodeFields(FROM_SESSION.error, field("Error: é"))).to.deep.equal({ error: "Error: é" });
    expect(decodeFields(FROM_SERVER.pong, Buffer.alloc(0))).to.deep.equal({});
    const json = Buffer.from('{"a":1}\0');
    expect(onlyField(json)?.toString()).to.equal('{"a":1}');
    expect(onlyField(json)?.buffer).to.equal(json.buffer);
    expect(onlyField(Buffer.from("1"))).to.equal(undefined);
  });

  it("refuses a payload that is not the frame's fields", () => {
    const refused = (decode: () => unknown): string => {
      try {
        decode();
        return "decoded";
      } catch (error) {
        return error instanceof ProtocolError ? error.message : String(error);
      }
    };
    expect(refused(() => decodeFields(FROM_SERVER.ready, Buffer.concat([field("tok"), field("4.3.2")])))).to.match(/no field pid/);
    expect(refused(() => decodeFields(FROM_SERVER.ready, Buffer.concat([field("tok"), field("4.3.2"), Buffer.from("123")])))).to.match(
      /no field pid/,
    );
    expect(refused(() => decodeFields(FROM_SERVER.forked, field("12a")))).to.match(/not a whole number/);
    expect(refused(() => decodeFields(FROM_SERVER.pong, field("")))).to.match(/bytes after its fields/);
  });

  it("accepts only the letters of the direction it reads", () => {
    const reader = new FrameReader(lettersOf(FROM_SESSION));
    expect(reader.push(encodeFrame(FROM_SESSION.message.letter, field("m"))).map((f) => f.type)).to.deep.equal([
      FROM_SESSION.message.letter,
    ]);
    expect(() => reader.push(encodeFrame(FROM_SERVER.ready.letter, field("tok")))).to.throw(ProtocolError, /frame of type/);
  });

  it("reads a greeting only and gives back the bytes after it", () => {
    const greeting = encodeFrame(FROM_SESSION.output.letter, field("tok"));
    const after = Buffer.from([0, MARKER.start, 0x41, 0x42]);
    const reader = new FrameReader([FROM_SESSION.main.letter, FROM_SESSION.output.letter], MAX_GREETING_PAYLOAD);
    const bytes = Buffer.concat([greeting, after]);
    expect(reader.push(bytes.subarray(0, 6), 1)).to.deep.equal([]);
    const frames = reader.push(bytes.subarray(6), 1);
    expect(frames.map((f) => [f.type, f.payload.toString()])).to.deep.equal([[FROM_SESSION.output.letter, "tok\0"]]);
    expect(reader.takeRest()?.equals(after)).to.equal(true);
    expect(reader.takeRest()).to.equal(undefined);
  });

  it("bounds a greeting to MAX_GREETING bytes, header included", () => {
    const main = FROM_SESSION.main.letter;
    const largest = encodeFrame(main, Buffer.alloc(MAX_GREETING_PAYLOAD, 0x61));
    expect(largest.length).to.equal(MAX_GREETING);
    expect(new FrameReader([main], MAX_GREETING_PAYLOAD).push(largest, 1)).to.have.length(1);
    const header = encodeFrame(main, Buffer.alloc(MAX_GREETING_PAYLOAD + 1)).subarray(0, 5);
    expect(() => new FrameReader([main], MAX_GREETING_PAYLOAD).push(header, 1)).to.throw(ProtocolError, /frame of 4092 bytes/);
    // Without a limit the same header only waits for its payload.
    expect(new FrameReader([main]).push(header)).to.deep.equal([]);
  });
});
