// Listeners for the session network tests, run inside a test's network namespace: for each
// `address:port` argument a TCP server that answers every connection with `reached <address>` and
// closes it. Prints `listening` once all listen; ends with its stdin.
import { createServer } from "node:net";

const servers = process.argv.slice(2).map((pair) => {
  const at = pair.lastIndexOf(":");
  const address = pair.slice(0, at);
  const server = createServer((socket) => socket.end(`reached ${address}\n`));
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(Number(pair.slice(at + 1)), address, () => resolve(server));
  });
});
await Promise.all(servers);
process.stdout.write("listening\n");
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
