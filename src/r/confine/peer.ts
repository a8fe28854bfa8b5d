import { readFile } from "node:fs/promises";
import type { Socket } from "node:net";

/**
 * The uid owning the other end of an accepted loopback TCP connection, from the kernel's socket table
 * (/proc/net/tcp: the client's entry has the client's port as local address and the uid of the process
 * that made it). A session proves who it is with a token, but a token can leak from a forked process's
 * memory into the next fork; the uid cannot be claimed by another session's process.
 */
export async function loopbackPeerUid(socket: Socket): Promise<number | undefined> {
  const clientPort = socket.remotePort;
  const serverPort = socket.localPort;
  if (clientPort === undefined || serverPort === undefined) return undefined;
  const local = `:${hex4(clientPort)}`;
  const remote = `:${hex4(serverPort)}`;
  const table = await readFile(socket.remoteFamily === "IPv6" ? "/proc/net/tcp6" : "/proc/net/tcp", "utf8");
  for (const line of table.split("\n")) {
    const cols = line.trim().split(/\s+/);
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
    if (cols[1]?.endsWith(local) && cols[2]?.endsWith(remote)) return Number(cols[7]);
  }
  return undefined;
}

function hex4(port: number): string {
  return port.toString(16).toUpperCase().padStart(4, "0");
}
