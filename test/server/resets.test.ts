import { expect } from "chai";
import { execFile } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { promisify } from "node:util";
import { startTestServer, type TestServer } from "../support/server.js";
import { sleep } from "../support/raw.js";

/**
 * A client may reset its connection at any point, also before a server owns the socket (while the
 * first bytes are read, while a cleartext client of the HTTPS port is answered): the service lives on.
 */

/** Opens a connection, sends `first`, lets the server read it, then resets (RST). */
async function resetAfter(port: number, first: string | Buffer): Promise<void> {
  const socket = net.connect(port, "127.0.0.1");
  socket.on("error", () => undefined);
  await new Promise((resolve) => socket.once("connect", resolve));
  socket.write(first);
  await sleep(5);
  socket.resetAndDestroy();
}

/** Completes a TLS handshake, starts a request, then resets the TCP connection under it. */
async function resetAfterHandshake(port: number, ca: Buffer): Promise<void> {
  const raw = net.connect(port, "127.0.0.1");
  raw.on("error", () => undefined);
  const secure = tls.connect({ socket: raw, ca, servername: "localhost", ALPNProtocols: ["http/1.1"] });
  secure.on("error", () => undefined);
  await new Promise((resolve) => secure.once("secureConnect", resolve));
  secure.write("POST /ws/draft/networks HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{");
  await sleep(5);
  raw.resetAndDestroy();
}

async function stillServes(server: TestServer, caFile?: string): Promise<void> {
  const trust = caFile ? ["--cacert", caFile] : [];
  const { stdout } = await promisify(execFile)("curl", ["-sS", "-o", "/dev/null", "-w", "%{http_code}", ...trust, `${server.url}/_info`]);
  expect(stdout).to.equal("200");
}

describe("clients resetting their connections", () => {
  let dir: string;
  let files: { cert: string; key: string };
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "rock-resets-"));
    files = { cert: path.join(dir, "cert.pem"), key: path.join(dir, "key.pem") };
    await promisify(execFile)("openssl", [
      ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", files.key, "-out", files.cert, "-days", "1"],
      ...["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
    ]);
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("leaves the cleartext port serving after resets during the first bytes", async () => {
    const server = await startTestServer();
    try {
      for (let i = 0; i < 5; i++) {
        await resetAfter(server.port, "PRI * HTTP/2"); // part of the HTTP/2 preface: still being read
        await resetAfter(server.port, "GET /_info HTTP/1.1\r\n");
      }
      await stillServes(server);
    } finally {
      await server.stop();
    }
  });

  it("leaves the HTTPS port serving after resets during the first bytes, the refusal of cleartext and TLS", async () => {
    const server = await startTestServer({ tls: files });
    const ca = fs.readFileSync(files.cert);
    try {
      for (let i = 0; i < 5; i++) {
        await resetAfter(server.port, "PRI * HTTP/2");
        await resetAfter(server.port, "GET /_info HTTP/1.1\r\nHost: t\r\n\r\n"); // answered 400 as it resets
        await resetAfter(server.port, Buffer.of(0x16, 0x03, 0x01)); // mid-handshake
        await resetAfterHandshake(server.port, ca);
      }
      await stillServes(server, files.cert);
    } finally {
      await server.stop();
    }
  });
});
