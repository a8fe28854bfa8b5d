import { expect } from "chai";
import { createSocket, type Socket as UdpSocket } from "node:dgram";
import { once } from "node:events";
import { connect, createServer, type Server, type Socket } from "node:net";
import { DnsRelay } from "../../src/r/confine/network/dns-relay.js";

/**
 * The relay of sessions' name queries (r.sessionNetwork restricted) against resolvers of the test's on
 * loopback addresses of their own, port 53 (as root), over real UDP and TCP sockets. A resolver's
 * "answer" is the query with a marker appended, so what came back is known to be that resolver's.
 */

const RESOLVER = "127.0.0.77";
/** Nothing listens there: a datagram to it is refused at once (ICMP port unreachable on loopback). */
const SILENT = "127.0.0.78";

function query(id: number, name: string): Buffer {
  const q = Buffer.alloc(2 + name.length);
  q.writeUInt16BE(id, 0);
  q.write(name, 2);
  return q;
}

/** `answer` is handed each query and a way to reply to its sender, now or later. */
async function udpResolver(address: string, answer: (q: Buffer, reply: (a: Buffer) => void) => void): Promise<UdpSocket> {
  const socket = createSocket("udp4");
  socket.on("message", (q, from) => answer(q, (a) => socket.send(a, from.port, from.address)));
  socket.bind(53, address);
  await once(socket, "listening");
  return socket;
}

/** The resolver's server and the connections it took. */
async function tcpResolver(address: string): Promise<{ server: Server; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    // DNS over TCP: each message behind its length in two bytes.
    let held = Buffer.alloc(0);
    socket.on("data", (bytes) => {
      held = Buffer.concat([held, bytes]);
      while (held.length >= 2 && held.length >= 2 + held.readUInt16BE(0)) {
        const message = held.subarray(2, 2 + held.readUInt16BE(0));
        held = held.subarray(2 + message.length);
        const reply = Buffer.concat([message, Buffer.from(" over tcp")]);
        const length = Buffer.alloc(2);
        length.writeUInt16BE(reply.length);
        socket.write(Buffer.concat([length, reply]));
      }
    });
  });
  server.listen(53, address);
  await once(server, "listening");
  return { server, sockets };
}

/** Sends `q` to the relay's UDP port; the first datagram back, or undefined within `ms`. */
async function askUdp(relay: DnsRelay, q: Buffer, ms = 3_000): Promise<Buffer | undefined> {
  const socket = createSocket("udp4");
  try {
    socket.bind(0, "127.0.0.1");
    await once(socket, "listening");
    const answer = new Promise<Buffer | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(undefined), ms);
      socket.once("message", (a) => {
        clearTimeout(timer);
        resolve(a);
      });
    });
    socket.send(q, relay.ports.udp, "127.0.0.1");
    return await answer;
  } finally {
    socket.close();
  }
}

describe("the session network's name relay (DNS over UDP and TCP, real sockets)", function () {
  this.timeout(20_000);
  const closing: Array<() => Promise<void> | void> = [];

  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close();
  });

  it("relays a datagram to the next resolver when the first refuses, and passes on only the answer to its query's id", async () => {
    const resolver = await udpResolver(RESOLVER, (q, reply) => {
      const stray = Buffer.from(q);
      stray.writeUInt16BE((q.readUInt16BE(0) + 1) & 0xffff, 0);
      // An answer to another id first: the relay must wait for the one to this query.
      reply(Buffer.concat([stray, Buffer.from(" stray")]));
      reply(Buffer.concat([q, Buffer.from(" answered")]));
    });
    closing.push(() => new Promise<void>((resolve) => resolver.close(() => resolve())));
    const relay = await DnsRelay.open("127.0.0.1", [SILENT, RESOLVER]);
    closing.push(() => relay.close());

    const started = Date.now();
    const answer = await askUdp(relay, query(0x1234, "example.test"));
    expect(answer?.toString("latin1", 2)).to.equal("example.test answered");
    expect(answer?.readUInt16BE(0)).to.equal(0x1234);
    // The refusing resolver was passed at once, not after its 2 s wait.
    expect(Date.now() - started).to.be.below(1_500);
  });

  it("relays a TCP connection to the first resolver, both ways, and ends both sides together", async () => {
    const resolver = await tcpResolver(RESOLVER);
    closing.push(() => new Promise<void>((resolve) => resolver.server.close(() => resolve())));
    const relay = await DnsRelay.open("127.0.0.1", [RESOLVER]);
    closing.push(() => relay.close());

    const client: Socket = connect({ host: "127.0.0.1", port: relay.ports.tcp });
    closing.push(() => void client.destroy());
    await once(client, "connect");
    const q = query(0xbeef, "db.example.test");
    const length = Buffer.alloc(2);
    length.writeUInt16BE(q.length);
    // Split across writes, as a resolver library may send it.
    client.write(length.subarray(0, 1));
    client.write(Buffer.concat([length.subarray(1), q]));
    const [reply] = (await once(client, "data")) as [Buffer];
    expect(reply.readUInt16BE(0)).to.equal(reply.length - 2);
    expect(reply.readUInt16BE(2)).to.equal(0xbeef);
    expect(reply.toString("latin1", 4)).to.equal("db.example.test over tcp");

    // The resolver ends its side: the session's connection ends too, not left open to the idle bound.
    expect(resolver.sockets.size).to.equal(1);
    const closed = once(client, "close");
    for (const socket of resolver.sockets) socket.destroy();
    const started = Date.now();
    await closed;
    expect(Date.now() - started).to.be.below(1_000);
  });

  it("refuses a TCP connection at once when no resolver is known, and answers nothing once closed", async () => {
    const empty = await DnsRelay.open("127.0.0.1", []);
    const client = connect({ host: "127.0.0.1", port: empty.ports.tcp });
    client.on("error", () => undefined);
    await once(client, "close");
    await empty.close();

    // A query still in flight when the relay closes: its late answer goes nowhere, and nothing throws.
    let release: (() => void) | undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const resolver = await udpResolver(RESOLVER, (q, reply) => {
      void held.then(() => reply(Buffer.concat([q, Buffer.from(" late")])));
    });
    closing.push(() => new Promise<void>((resolve) => resolver.close(() => resolve())));
    const relay = await DnsRelay.open("127.0.0.1", [RESOLVER]);
    const pending = askUdp(relay, query(7, "late.test"), 1_000);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await relay.close();
    release?.();
    expect(await pending).to.equal(undefined);
  });
});
