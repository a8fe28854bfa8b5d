import { expect } from "chai";
import net from "node:net";
import { RChild, type EvalEvent } from "../../src/r/child.js";
import { encodeFrame } from "../../src/r/protocol.js";

/**
 * The Node side of the session protocol against a peer that plays R over real loopback sockets, so
 * that chunk boundaries can be put exactly where R's writes may put them.
 */
describe("session protocol: output markers across chunk boundaries, live and quiet requests", () => {
  let server: net.Server;
  let child: RChild;
  let rMain: net.Socket;
  let rOut: net.Socket;
  const logged: string[] = [];

  before(async () => {
    server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    const accepted: net.Socket[] = [];
    const two = new Promise<void>((resolve) =>
      server.on("connection", (s) => {
        s.setNoDelay(true);
        if (accepted.push(s) === 2) resolve();
      }),
    );
    rMain = net.connect(port, "127.0.0.1");
    await new Promise((r) => rMain.once("connect", r));
    rOut = net.connect(port, "127.0.0.1");
    await two;
    rMain.setNoDelay(true);
    rOut.setNoDelay(true);
    child = new RChild(process.pid, accepted[0]!, accepted[1]!, (t) => logged.push(t));
    child.start(undefined, undefined);
  });
  after(async () => {
    rMain.destroy();
    rOut.destroy();
    await new Promise((r) => server.close(r));
  });

  const pause = () => new Promise((r) => setTimeout(r, 30));
  const nul = (type: number) => Buffer.from([0, type]);

  it("restores the order of output, messages and the value when NUL and its type byte arrive apart", async () => {
    const events: EvalEvent[] = [];
    const outcome = child.run(encodeFrame("L", Buffer.from("j"), Buffer.from("x")), (e) => events.push(e));
    // R starts (marker), prints "a\x01b", then a message (marker + frame), prints "c", then ends
    // (marker + value frame).
    rOut.write(Buffer.concat([nul(2), Buffer.from("a\x01b"), nul(1).subarray(0, 1)]));
    await pause();
    rMain.write(encodeFrame("M", Buffer.from("m\n")));
    await pause();
    rOut.write(Buffer.concat([nul(1).subarray(1), Buffer.from("c"), Buffer.from([0])]));
    await pause();
    rMain.write(encodeFrame("V", Buffer.from("42")));
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
    const outcome = child.run(encodeFrame("L", Buffer.from("j"), Buffer.from("y")), (e) => events.push(e));
    rOut.write(Buffer.concat([nul(2), Buffer.from("\x02\x01 printed\n")]));
    await pause();
    rOut.write(nul(0));
    rMain.write(encodeFrame("V", Buffer.from("1")));
    expect(await outcome).to.deep.equal({ ok: true, value: Buffer.from("1") });
    expect(events.map((e) => e.text).join("")).to.equal("\x02\x01 printed\n");
  });

  it("answers a request that is not live without waiting for a marker; its output goes to the log", async () => {
    logged.length = 0;
    const outcome = child.run(encodeFrame("E", Buffer.from("j"), Buffer.from("z")));
    rOut.write("quiet\n");
    await pause();
    rMain.write(encodeFrame("V", Buffer.from("7")));
    expect(await outcome).to.deep.equal({ ok: true, value: Buffer.from("7") });
    expect(logged.join("")).to.equal("quiet\n");
  });

  it("streams only what a live request printed after its start marker", async () => {
    logged.length = 0;
    const events: EvalEvent[] = [];
    const outcome = child.run(encodeFrame("L", Buffer.from("j"), Buffer.from("w")), (e) => events.push(e));
    // The tail of what an earlier request printed arrives first, in the same chunk as the marker.
    rOut.write(Buffer.concat([Buffer.from("earlier\n"), nul(2), Buffer.from("mine\n"), nul(0)]));
    rMain.write(encodeFrame("V", Buffer.from("1")));
    expect(await outcome).to.deep.equal({ ok: true, value: Buffer.from("1") });
    expect(events).to.deep.equal([{ kind: "output", text: "mine\n" }]);
    expect(logged.join("")).to.equal("earlier\nmine\n");
  });
});
