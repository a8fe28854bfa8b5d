// A resolver for the session network tests, run inside a test's network namespace on `address`
// (argument 1), port 53: every A query is answered with `answer` (argument 2), anything else with no
// record. Prints `listening` once it listens; ends with its stdin.
import { createSocket } from "node:dgram";

const [address, answer] = process.argv.slice(2);
const socket = createSocket("udp4");
socket.on("message", (query, from) => {
  // The question: the name's labels from byte 12, then its type and class.
  let end = 12;
  while (end < query.length && query[end] !== 0) end += query[end] + 1;
  const question = query.subarray(12, end + 5);
  const type = query.readUInt16BE(end + 1);
  const header = Buffer.from(query.subarray(0, 12));
  header.writeUInt16BE(0x8180, 2); // a response, recursion desired and available, no error
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(type === 1 ? 1 : 0, 6);
  header.writeUInt32BE(0, 8);
  const record = Buffer.concat([
    Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]),
    Buffer.from(answer.split(".").map(Number)),
  ]);
  socket.send(Buffer.concat([header, question, type === 1 ? record : Buffer.alloc(0)]), from.port, from.address);
});
socket.bind(53, address, () => process.stdout.write("listening\n"));
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
