/**
 * A small network of a test's own, made with `ip` as root and removed whole by remove(): a namespace
 * `host` that plays the machine a server runs on, linked to this machine's namespace (`control`, which
 * the test calls the server over) and to a namespace `remote` that plays the rest of the network. Only
 * these namespaces' addresses are ever used: `host` has no default route, so nothing it sends can leave
 * this machine.
 *
 * - host: loopback; 10.251.N.2 (control link); 10.252.N.1 (its "own address" on the LAN); a route to
 *   169.254.177.0/30 through remote; its /etc/resolv.conf (`ip netns exec` binds /etc/netns/<name>/)
 *   names a resolver on its loopback, 127.0.0.53.
 * - remote: 10.252.N.2 (a private address) and 169.254.177.2/30 (a link-local one, as a cloud's
 *   metadata address is).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";

const HERE = new URL(".", import.meta.url).pathname;

export interface Listener {
  readonly address: string;
  readonly port: number;
}

export class TestTopology {
  readonly host: string;
  readonly remote: string;
  /** The server's address on the control link, which the test calls it at. */
  readonly controlAddress: string;
  readonly hostAddress: string;
  readonly privateAddress: string;
  readonly linkLocalAddress = "169.254.177.2";
  private readonly control: string;
  private readonly processes: ChildProcess[] = [];

  private constructor(suffix: string, n: number) {
    this.host = `r38h-${suffix}`;
    this.remote = `r38r-${suffix}`;
    this.control = `r38c-${suffix}`;
    this.controlAddress = `10.251.${n}.2`;
    this.hostAddress = `10.252.${n}.1`;
    this.privateAddress = `10.252.${n}.2`;
  }

  static make(): TestTopology {
    const t = new TestTopology(randomBytes(3).toString("hex"), 1 + Math.floor(Math.random() * 250));
    try {
      t.build();
    } catch (e) {
      t.remove();
      throw e;
    }
    return t;
  }

  /** The command that runs a program in the host namespace (with its resolv.conf). */
  get runner(): readonly string[] {
    return ["ip", "netns", "exec", this.host];
  }

  private build(): void {
    const n = this.controlAddress.split(".")[2];
    ip("netns", "add", this.host);
    ip("netns", "add", this.remote);
    ip("-n", this.host, "link", "set", "lo", "up");
    ip("-n", this.remote, "link", "set", "lo", "up");
    ip("link", "add", this.control, "type", "veth", "peer", "name", "ctl", "netns", this.host);
    ip("address", "add", `10.251.${n}.1/24`, "dev", this.control);
    ip("link", "set", this.control, "up");
    ip("-n", this.host, "address", "add", `${this.controlAddress}/24`, "dev", "ctl");
    ip("-n", this.host, "link", "set", "ctl", "up");
    ip("-n", this.host, "link", "add", "lan", "type", "veth", "peer", "name", "lan", "netns", this.remote);
    ip("-n", this.host, "address", "add", `${this.hostAddress}/24`, "dev", "lan");
    ip("-n", this.host, "link", "set", "lan", "up");
    ip("-n", this.remote, "address", "add", `${this.privateAddress}/24`, "dev", "lan");
    ip("-n", this.remote, "address", "add", `${this.linkLocalAddress}/30`, "dev", "lan");
    ip("-n", this.remote, "link", "set", "lan", "up");
    ip("-n", this.host, "route", "add", "169.254.177.0/30", "via", this.privateAddress);
    mkdirSync(`/etc/netns/${this.host}`, { recursive: true });
    writeFileSync(`/etc/netns/${this.host}/resolv.conf`, "nameserver 127.0.0.53\n");
  }

  /** TCP listeners in `namespace` answering `reached <address>`. */
  async listen(namespace: string, listeners: readonly Listener[]): Promise<void> {
    await this.start(
      namespace,
      "listen.mjs",
      listeners.map((l) => `${l.address}:${l.port}`),
    );
  }

  /** A resolver on the host's 127.0.0.53 answering every name with `answer`. */
  async resolver(answer: string): Promise<void> {
    await this.start(this.host, "dns-stub.mjs", ["127.0.0.53", answer]);
  }

  /** Runs `args` in `namespace` to its end; its stdout. */
  exec(namespace: string, args: readonly string[]): string {
    return execFileSync("ip", ["netns", "exec", namespace, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  }

  /** The nftables tables of the host namespace. */
  tables(): string[] {
    return this.exec(this.host, ["nft", "list", "tables"]).trim().split("\n").filter(Boolean);
  }

  /** The network devices of the host namespace. */
  devices(): string[] {
    return this.exec(this.host, ["ip", "-o", "link"])
      .split("\n")
      .filter(Boolean)
      .map((line) => line.split(":")[1]!.trim().split("@")[0]!);
  }

  /** Ends the programs it started and removes the namespaces, the control link and the resolv.conf. */
  remove(): void {
    for (const child of this.processes) child.kill("SIGKILL");
    for (const ns of [this.host, this.remote]) {
      try {
        ip("netns", "delete", ns);
      } catch {
        // not made
      }
    }
    try {
      ip("link", "delete", this.control);
    } catch {
      // gone with the host namespace
    }
    rmSync(`/etc/netns/${this.host}`, { recursive: true, force: true });
  }

  private async start(namespace: string, script: string, args: readonly string[]): Promise<void> {
    const child = spawn("ip", ["netns", "exec", namespace, process.execPath, `${HERE}${script}`, ...args], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.processes.push(child);
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (t: string) => (stderr += t));
    const [first] = await Promise.race([once(child.stdout!, "data"), once(child, "exit")]);
    if (!Buffer.isBuffer(first)) throw new Error(`${script} did not start: ${stderr}`);
  }
}

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}
