import { expect } from "chai";
import { encodeFrame, FrameReader, type Frame } from "../../src/r/wire/frames.js";
import { FROM_SESSION, lettersOf, type Letter } from "../../src/r/wire/protocol-table.js";

type Answer = Frame<Letter<typeof FROM_SESSION>>;
const frame = (type: Answer["type"], payload: Buffer): Answer => ({ type, payload });
const reader = () => new FrameReader(lettersOf(FROM_SESSION));
const plain = (frames: Frame[]) => frames.map((f) => ({ type: f.type, payload: Buffer.from(f.payload).toString("hex") }));

describe("FrameReader", () => {
  const frames = [
    frame("V", Buffer.alloc(0)),
    frame("M", Buffer.from("m")),
    frame("X", Buffer.from("four")),
    frame("W", Buffer.from("a warning, longer than a header")),
  ];
  const stream = Buffer.concat(frames.map((f) => encodeFrame(f.type, f.payload)));

  it("cuts a stream split anywhere into the same frames", () => {
    for (let a = 0; a <= stream.length; a++) {
      for (let b = a; b <= stream.length; b++) {
        const cutter = reader();
        const got = [stream.subarray(0, a), stream.subarray(a, b), stream.subarray(b)].flatMap((c) => cutter.push(c));
        expect(plain(got), `cut at ${a} and ${b}`).to.deep.equal(plain(frames));
      }
    }
  });

  it("takes a stream byte by byte", () => {
    const cutter = reader();
    const got: Answer[] = [];
    for (let i = 0; i < stream.length; i++) got.push(...cutter.push(stream.subarray(i, i + 1)));
    expect(plain(got)).to.deep.equal(plain(frames));
  });

  it("rebuilds a 50 MB frame from 64 KiB chunks, with the next frame in its last chunk", function () {
    // Copying what came so far at each chunk took 15 s here; one copy takes 0.3 s.
    this.timeout(5000);
    const big = Buffer.allocUnsafe(50e6);
    for (let i = 0; i < big.length; i += 4) big.writeUInt32LE(i, i);
    const bytes = Buffer.concat([encodeFrame("V", big), encodeFrame("M", Buffer.from("next"))]);
    const cutter = reader();
    const got: Answer[] = [];
    for (let i = 0; i < bytes.length; i += 65536) got.push(...cutter.push(bytes.subarray(i, i + 65536)));
    expect(got.map((f) => f.type)).to.deep.equal(["V", "M"]);
    expect(got[0]!.payload.equals(big)).to.equal(true);
    expect(got[1]!.payload.toString()).to.equal("next");
  });

  it("passes a diverted payload on as it arrives, in order, wherever the chunks cut it, and reads on", () => {
    const big = Buffer.from(Array.from({ length: 300 }, (_, i) => i % 251));
    const bytes = Buffer.concat([encodeFrame("V", big), encodeFrame("M", Buffer.from("next")), encodeFrame("V", Buffer.from("small"))]);
    for (const size of [1, 2, 5, 64, 299, 1000]) {
      const passed: Buffer[] = [];
      const asked: Array<[string, number]> = [];
      const cutter = new FrameReader(lettersOf(FROM_SESSION), undefined, (type, length) => {
        asked.push([type, length]);
        return type === "V" && length === big.length ? (piece: Buffer) => void passed.push(Buffer.from(piece)) : undefined;
      });
      const got: Answer[] = [];
      for (let i = 0; i < bytes.length; i += size) got.push(...cutter.push(bytes.subarray(i, i + size)));
      // Only a payload that does not come whole in its chunk is offered: one that does comes gathered.
      const diverted = size < big.length + 5;
      expect(
        asked.some(([, length]) => length === big.length),
        `chunks of ${size}`,
      ).to.equal(diverted);
      expect(Buffer.concat(passed).equals(diverted ? big : Buffer.alloc(0)), `chunks of ${size}`).to.equal(true);
      const first = frame("V", diverted ? Buffer.alloc(0) : big);
      expect(plain(got), `chunks of ${size}`).to.deep.equal(
        plain([first, frame("M", Buffer.from("next")), frame("V", Buffer.from("small"))]),
      );
    }
  });
});
