import { readFile } from "node:fs/promises";
import type { Socket } from "node:net";
import { endianness } from "node:os";

/** The kernel's table of IPv4 TCP sockets (the R server's listener is on 127.0.0.1). */
const TABLE = "/proc/net/tcp";

/** A read of the table, and when it started. */
interface TableRead {
  readonly startedAt: number;
  readonly text: Promise<string>;
}

/**
 * The last read started. The kernel walks its whole established-connection hash to print the table
 * (262,144 buckets on a machine with 24 GiB: 4–10 ms a read here, more under load), so connections
 * accepted before a read started share it: a connection that existed for the whole read is in it.
 */
let latest: TableRead | undefined;

function tableSince(acceptedAt: number): Promise<string> {
  if (latest && latest.startedAt >= acceptedAt) return latest.text;
  const read: TableRead = { startedAt: performance.now(), text: readFile(TABLE, "utf8") };
  latest = read;
  // A failed read is not kept for later callers.
  read.text.catch(() => {
    if (latest === read) latest = undefined;
  });
  return read.text;
}

/**
 * The uid owning the other end of an accepted loopback TCP connection, from the kernel's socket table
 * (/proc/net/tcp: the client's entry has the client's address as local address and the uid of the
 * process that made it). A session proves who it is with a token, but a token can leak from a forked
 * process's memory into the next fork; the uid cannot be claimed by another session's process.
 *
 * `acceptedAt` (performance.now() when the connection was accepted, or later) lets a read of the table
 * that started since then answer: the connection existed for all of it. A socket's owner never changes
 * and its address pair is unique while Node holds its end open, so such a read tells the truth.
 */
export async function loopbackPeerUid(socket: Socket, acceptedAt = performance.now()): Promise<number | undefined> {
  const { remoteAddress, remotePort, localAddress, localPort, remoteFamily } = socket;
  if (
    remoteAddress === undefined ||
    remotePort === undefined ||
    localAddress === undefined ||
    localPort === undefined ||
    remoteFamily !== "IPv4"
  )
    return undefined;
  // The client's row: its address is the row's local one, ours its remote one.
  const local = `${hexIPv4(remoteAddress)}:${hex4(remotePort)}`;
  const remote = `${hexIPv4(localAddress)}:${hex4(localPort)}`;
  // The kernel prints the table a page per read() and resumes each at an offset within a hash bucket:
  // a socket closing earlier in the same bucket meanwhile can make a row slip by. A row missing from a
  // shared read is looked for once more in a read of its own.
  return uidIn(await tableSince(acceptedAt), local, remote) ?? uidIn(await tableSince(performance.now()), local, remote);
}

function uidIn(table: string, local: string, remote: string): number | undefined {
  for (const line of table.split("\n")) {
    const cols = line.trim().split(/\s+/);
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid …; a TIME_WAIT row (06) is what is
    // left of an earlier connection of the same pair, owned by nobody (uid 0).
    if (cols[1] === local && cols[2] === remote && cols[3] !== "06") return Number(cols[7]);
  }
  return undefined;
}

/** An IPv4 address as the kernel prints its 32 bits: in the machine's byte order. */
function hexIPv4(address: string): string {
  const bytes = address.split(".").map((b) => Number(b).toString(16).toUpperCase().padStart(2, "0"));
  return (endianness() === "LE" ? bytes.reverse() : bytes).join("");
}

function hex4(port: number): string {
  return port.toString(16).toUpperCase().padStart(4, "0");
}
