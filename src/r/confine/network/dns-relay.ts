import { createSocket, type Socket as UdpSocket } from "node:dgram";
import { once } from "node:events";
import { connect, createServer, isIPv6, type Server, type Socket } from "node:net";

/** How long one resolver may take to answer a query over UDP before the next is asked. */
const UDP_TIMEOUT_MS = 2_000;
/** A TCP exchange that sends nothing for this long is ended. */
const TCP_IDLE_MS = 10_000;
/** Queries relayed at once, each way; past it a query is dropped (the resolver library asks again). */
const IN_FLIGHT = 256;
/** A DNS message over UDP is at most this long (EDNS's largest). */
const MAX_DATAGRAM = 65_535;

/**
 * Relays sessions' name queries to the host's resolvers, from the service's own namespace: a session's
 * loopback is its own, so a resolver on the host's (systemd-resolved's 127.0.0.53, Docker's
 * 127.0.0.11) or on a link-local address (NodeLocal DNSCache) is reached only through it. Over UDP
 * each query goes to the resolvers in turn until one answers; over TCP, a connection to the first.
 * Listens on `address`, on ports of its own (the host's table sends port 53 there).
 */
export class DnsRelay {
  private inFlight = 0;
  /** Answers that arrive once the relay closed go nowhere (sending on a closed socket throws). */
  private closed = false;
  private readonly connections = new Set<Socket>();

  private constructor(
    private readonly udp: UdpSocket,
    private readonly tcp: Server,
    private readonly resolvers: readonly string[],
  ) {
    udp.on("message", (query, from) => this.relayDatagram(query, from.address, from.port));
    tcp.on("connection", (socket) => this.relayStream(socket));
  }

  static async open(address: string, resolvers: readonly string[]): Promise<DnsRelay> {
    const udp = createSocket("udp4");
    udp.on("error", () => undefined);
    udp.bind(0, address);
    await once(udp, "listening");
    const tcp = createServer();
    tcp.on("error", () => undefined);
    tcp.listen(0, address);
    await once(tcp, "listening");
    return new DnsRelay(udp, tcp, resolvers);
  }

  get ports(): { udp: number; tcp: number } {
    return { udp: this.udp.address().port, tcp: (this.tcp.address() as { port: number }).port };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const socket of this.connections) socket.destroy();
    await Promise.all([
      new Promise<void>((resolve) => this.udp.close(() => resolve())),
      new Promise<void>((resolve) => this.tcp.close(() => resolve())),
    ]);
  }

  private relayDatagram(query: Buffer, address: string, port: number): void {
    if (this.inFlight >= IN_FLIGHT || query.length > MAX_DATAGRAM) return;
    this.inFlight++;
    void this.ask(query).then((answer) => {
      this.inFlight--;
      if (answer && !this.closed) this.udp.send(answer, port, address);
    });
  }

  /** The first answer of the resolvers asked in turn; undefined when none answers. */
  private async ask(query: Buffer): Promise<Buffer | undefined> {
    for (const resolver of this.resolvers) {
      const answer = await askOne(query, resolver);
      if (answer) return answer;
    }
    return undefined;
  }

  private relayStream(client: Socket): void {
    const resolver = this.resolvers[0];
    if (resolver === undefined || this.connections.size >= IN_FLIGHT) {
      client.destroy();
      return;
    }
    const upstream = connect({ host: resolver, port: 53 });
    for (const socket of [client, upstream]) {
      this.connections.add(socket);
      socket.setTimeout(TCP_IDLE_MS, () => socket.destroy());
      socket.on("error", () => undefined);
      socket.once("close", () => {
        this.connections.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }
}

/** One resolver's answer to `query` over UDP, from a socket of its own (a port of its own per query). */
function askOne(query: Buffer, resolver: string): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const socket = createSocket(isIPv6(resolver) ? "udp6" : "udp4");
    let finished = false;
    const done = (answer: Buffer | undefined): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      socket.close();
      resolve(answer);
    };
    const timer = setTimeout(() => done(undefined), UDP_TIMEOUT_MS);
    socket.on("error", () => done(undefined));
    // Connected: only the resolver's datagrams arrive, and only its answer to this query's id counts.
    socket.on("message", (answer) => {
      if (answer.length >= 2 && query.length >= 2 && answer.readUInt16BE(0) === query.readUInt16BE(0)) done(answer);
    });
    socket.connect(53, resolver, () => socket.send(query));
  });
}
