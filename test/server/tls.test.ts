import { expect } from "chai";
import { execFile } from "node:child_process";
import fs from "node:fs";
import http2 from "node:http2";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { promisify } from "node:util";
import * as grpcJs from "@grpc/grpc-js";
import { createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { NetworkService } from "../../gen/es/rock/networks/v1/networks_pb.js";
import type { HealthCheckResponse } from "../../gen/grpc-js/grpc/health/v1/health.js";
import { HealthCheckResponse_ServingStatus } from "../../gen/grpc-js/grpc/health/v1/health.js";
import type { GetNetworkResponse } from "../../gen/grpc-js/rock/networks/v1/networks.js";
import { loadConfig } from "../../src/config/load.js";
import { basic, startTestServer, type TestServer } from "../support/server.js";
import { call, grpcClients, metadataFor } from "../support/clients.js";
import { H2_PREFACE, openRaw, within } from "../support/raw.js";

/**
 * The port with a certificate: HTTPS only, HTTP/2 and HTTP/1.1 by ALPN, every protocol and every
 * connection bound of the cleartext port. Certificates are made by `openssl` in a temporary folder.
 */

const run = promisify(execFile);
const BUF = path.resolve("node_modules/.bin/buf");

/** A self-signed certificate for localhost and 127.0.0.1, valid one day. */
async function makeCertificate(dir: string, name: string): Promise<{ cert: string; key: string }> {
  const cert = path.join(dir, `${name}-cert.pem`);
  const key = path.join(dir, `${name}-key.pem`);
  await run("openssl", [
    ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1"],
    ...["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
  ]);
  return { cert, key };
}

interface CurlAnswer {
  readonly status: number;
  readonly httpVersion: string;
  readonly body: string;
}

/** curl with its status and HTTP version written after the body. */
async function curl(args: readonly string[]): Promise<CurlAnswer> {
  const { stdout } = await run("curl", ["-sS", "--max-time", "10", "-w", "\n%{http_code} %{http_version}", ...args]);
  const cut = stdout.lastIndexOf("\n");
  const [status, httpVersion] = stdout.slice(cut + 1).split(" ");
  return { status: Number(status), httpVersion: httpVersion!, body: stdout.slice(0, cut) };
}

describe("TLS on the one port", () => {
  let dir: string;
  let files: { cert: string; key: string };
  let ca: Buffer;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "rock-tls-"));
    files = await makeCertificate(dir, "server");
    ca = fs.readFileSync(files.cert);
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  describe("every protocol over HTTPS", () => {
    let server: TestServer;
    /** buf keeps a cache; tests keep it in a temporary folder. */
    let bufCache: string;
    const buf = (args: string[]) =>
      run(BUF, ["curl", "--cacert", files.cert, ...args], { env: { ...process.env, BUF_CACHE_DIR: bufCache } });

    before(async () => {
      bufCache = fs.mkdtempSync(path.join(os.tmpdir(), "rock-buf-"));
      server = await startTestServer({ tls: files, node: { publicUrl: "https://rock.example.org:8443" } });
      expect(server.url).to.match(/^https:/);
      const created = await curl([
        ...["--cacert", files.cert, "-u", "cadmin:cadmin", "-H", "content-type: application/json"],
        ...["-d", JSON.stringify({ name: [{ lang: "en", value: "Proto Net" }], acronym: [{ lang: "en", value: "PN" }] })],
        `${server.url}/ws/draft/networks`,
      ]);
      expect(created.status).to.equal(201);
    });
    after(async () => {
      await server?.stop();
      fs.rmSync(bufCache, { recursive: true, force: true });
    });

    it("serves /_info to curl over HTTP/1.1 and HTTP/2 (ALPN), announcing the https public URL", async () => {
      for (const [flag, version] of [
        ["--http1.1", "1.1"],
        ["--http2", "2"],
      ] as const) {
        const res = await curl(["--cacert", files.cert, flag, `${server.url}/_info`]);
        expect(res.status, flag).to.equal(200);
        expect(res.httpVersion, flag).to.equal(version);
        expect(JSON.parse(res.body)).to.include({ type: "rock", server: "https://rock.example.org:8443" });
      }
    });

    it("answers REST with Basic auth, and 401 without it", async () => {
      const res = await curl(["--cacert", files.cert, "-u", "editor:editor", `${server.url}/ws/draft/network/pn`]);
      expect(res.status).to.equal(200);
      expect(JSON.parse(res.body)).to.include({ id: "pn" });
      expect((await curl(["--cacert", files.cert, "--http2", `${server.url}/ws/draft/network/pn`])).status).to.equal(401);
    });

    it("answers @grpc/grpc-js over TLS (credentials.createSsl)", async () => {
      const grpc = grpcClients(server.port, ca);
      try {
        const res = await call<GetNetworkResponse>((cb) => grpc.networks.getNetwork({ id: "pn" }, metadataFor("editor"), cb));
        expect(res.network?.acronym[0]?.value).to.equal("PN");
        const health = await call<HealthCheckResponse>((cb) => grpc.health.check({ service: "" }, metadataFor(), cb));
        expect(health.status).to.equal(HealthCheckResponse_ServingStatus.SERVING);
      } finally {
        grpc.close();
      }
    });

    const transports: Record<string, (baseUrl: string, ca: Buffer) => Transport> = {
      "Connect over HTTP/1.1": (baseUrl, ca) => createConnectTransport({ baseUrl, httpVersion: "1.1", nodeOptions: { ca } }),
      "Connect over HTTP/2": (baseUrl, ca) => createConnectTransport({ baseUrl, httpVersion: "2", nodeOptions: { ca } }),
      "gRPC-Web over HTTP/1.1": (baseUrl, ca) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1", nodeOptions: { ca } }),
      "gRPC-Web over HTTP/2": (baseUrl, ca) => createGrpcWebTransport({ baseUrl, httpVersion: "2", nodeOptions: { ca } }),
      gRPC: (baseUrl, ca) => createGrpcTransport({ baseUrl, nodeOptions: { ca } }),
    };
    for (const [name, transport] of Object.entries(transports)) {
      it(`answers a Connect-ES client, ${name}`, async () => {
        const client = createClient(NetworkService, transport(server.url, ca));
        const res = await client.getNetwork({ id: "pn" }, { headers: { authorization: basic("editor") } });
        expect(res.network?.name[0]?.value).to.equal("Proto Net");
      });
    }

    it("lets buf curl list the services through reflection and call an RPC by name", async function () {
      this.timeout(60_000);
      const listed = await buf(["--list-services", server.url]);
      expect(listed.stdout.trim().split("\n")).to.include.members([
        "rock.networks.v1.NetworkService",
        "grpc.reflection.v1.ServerReflection",
      ]);
      const called = await buf([
        "-H",
        `authorization: ${basic("editor")}`,
        "-d",
        '{"id":"pn"}',
        `${server.url}/rock.networks.v1.NetworkService/GetNetwork`,
      ]);
      expect((JSON.parse(called.stdout) as { network: { id: string } }).network.id).to.equal("pn");
    });

    it("answers a cleartext HTTP/1.1 request 400 saying the port speaks HTTPS, and closes", async () => {
      const res = await curl([`http://127.0.0.1:${server.port}/_info`]);
      expect(res.status).to.equal(400);
      expect(res.body).to.include("HTTPS only");
    });

    it("serves no h2c: a cleartext gRPC client fails with UNAVAILABLE", async () => {
      const grpc = grpcClients(server.port);
      try {
        const err = await call<HealthCheckResponse>((cb) => grpc.health.check({ service: "" }, metadataFor(), cb)).catch(
          (e: grpcJs.ServiceError) => e,
        );
        expect((err as grpcJs.ServiceError).code).to.equal(grpcJs.status.UNAVAILABLE);
      } finally {
        grpc.close();
      }
    });
  });

  describe("connection bounds over TLS", () => {
    /** As in hardening.test.ts: small, each distinct. */
    const TIGHT = { idleTimeoutSeconds: 1, headersTimeoutSeconds: 0.3, requestTimeoutSeconds: 0.8, bodyIdleTimeoutSeconds: 0.5 };
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ tls: files, limits: TIGHT });
    });
    after(() => server?.stop());

    /** A TLS connection with the given ALPN; resolves once the handshake is done. */
    function secureConnect(alpn: string): Promise<{ socket: tls.TLSSocket; received: () => string; closed: Promise<number> }> {
      return new Promise((resolve, reject) => {
        const chunks: Buffer[] = [];
        const socket = tls.connect({ host: "127.0.0.1", port: server.port, ca, servername: "localhost", ALPNProtocols: [alpn] }, () => {
          const opened = Date.now();
          const closed = new Promise<number>((done) => socket.once("close", () => done(Date.now() - opened)));
          resolve({ socket, received: () => Buffer.concat(chunks).toString(), closed });
        });
        socket.on("data", (c: Buffer) => chunks.push(c));
        socket.once("error", reject);
      });
    }

    it("closes a TLS handshake that does not finish within the header time", async () => {
      const conn = await openRaw(server.port);
      conn.socket.write(Buffer.of(0x16, 0x03, 0x01)); // a handshake record that never comes whole
      expect(await within(conn.closed, 3000)).to.be.within(250, 900);
      expect(conn.received()).to.have.length(0);
    });

    it("closes an HTTP/2 session over TLS that does not finish the SETTINGS exchange within the header time", async () => {
      const conn = await secureConnect("h2");
      conn.socket.on("error", () => undefined);
      expect(conn.socket.alpnProtocol).to.equal("h2");
      conn.socket.write(H2_PREFACE);
      expect(await within(conn.closed, 3000)).to.be.below(900);
    });

    it("closes an idle HTTP/1.1 keep-alive connection over TLS after the idle time", async () => {
      const conn = await secureConnect("http/1.1");
      conn.socket.on("error", () => undefined);
      conn.socket.write("GET /_info HTTP/1.1\r\nHost: t\r\n\r\n");
      const closedAfter = await within(conn.closed, 4000);
      expect(conn.received()).to.match(/^HTTP\/1\.1 200 /);
      // Node keeps a keep-alive connection a second longer than it tells the client (Keep-Alive: timeout=1).
      expect(closedAfter).to.be.within(900, 2500);
    });

    it("resets an HTTP/2 stream over TLS whose body does not come within the body idle time", async () => {
      const session = http2.connect(server.url, { ca, servername: "localhost" });
      session.on("error", () => undefined);
      try {
        const headers = {
          ":method": "POST",
          ":path": "/ws/draft/networks",
          "content-type": "application/json",
          authorization: basic("editor"),
        };
        const stream = session.request(headers, { endStream: false });
        stream.on("error", () => undefined);
        stream.resume();
        const opened = Date.now();
        const after = await within(new Promise<number>((resolve) => stream.once("close", () => resolve(Date.now() - opened))), 3000);
        expect(after).to.be.within(400, 790);
        expect(stream.rstCode).to.equal(http2.constants.NGHTTP2_CANCEL);
      } finally {
        session.destroy();
      }
    });
  });

  describe("certificate files", () => {
    /** Starting refuses: the message it refuses with. */
    async function refusal(tlsFiles: { cert: string; key: string }): Promise<string> {
      const started = await startTestServer({ tls: tlsFiles }).then(
        (s) => s,
        (e: Error) => e.message,
      );
      if (typeof started !== "string") {
        await started.stop();
        expect.fail("the server started");
      }
      return started;
    }

    it("refuses to start when the certificate cannot be read, naming the file", async () => {
      const missing = path.join(dir, "missing-cert.pem");
      expect(await refusal({ cert: missing, key: files.key })).to.equal(`tls.cert ${missing}: cannot be read (ENOENT)`);
    });

    it("refuses a certificate or key that is not PEM, naming the file and never the key's content", async () => {
      const junk = path.join(dir, "junk.pem");
      fs.writeFileSync(junk, "not a certificate\n");
      expect(await refusal({ cert: junk, key: files.key })).to.match(new RegExp(`^tls\\.cert ${junk}: not a PEM certificate \\(`));
      const badKey = path.join(dir, "bad-key.pem");
      fs.writeFileSync(badKey, "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n");
      const message = await refusal({ cert: files.cert, key: badKey });
      expect(message).to.match(new RegExp(`^tls\\.key ${badKey}: not an unencrypted PEM private key \\(`));
      expect(message).not.to.include("c2VjcmV0");
    });

    it("refuses a key that is not the certificate's, naming both files", async () => {
      const other = await makeCertificate(dir, "other");
      expect(await refusal({ cert: files.cert, key: other.key })).to.match(
        new RegExp(`^tls\\.key ${other.key} is not the key of tls\\.cert ${files.cert} \\(`),
      );
    });

    it("refuses a certificate without a key", async () => {
      expect(await refusal({ cert: files.cert, key: "" })).to.match(/^tls\.key is not set: tls\.cert and tls\.key .* go together/);
    });
  });

  describe("configuration", () => {
    it("reads tls.cert and tls.key from the file and ROCK_TLS_CERT / ROCK_TLS_KEY over it, as absolute paths", () => {
      const yaml = path.join(dir, "rock.yaml");
      fs.writeFileSync(yaml, "tls:\n  cert: relative/cert.pem\n  key: /etc/rock/key.pem\n");
      const fromFile = loadConfig(yaml, {});
      expect(fromFile.tls).to.deep.equal({ cert: path.resolve("relative/cert.pem"), key: "/etc/rock/key.pem" });
      const fromEnv = loadConfig(yaml, { ROCK_TLS_CERT: files.cert, ROCK_TLS_KEY: files.key });
      expect(fromEnv.tls).to.deep.equal(files);
      expect(loadConfig(undefined, {}).tls).to.deep.equal({ cert: "", key: "" });
    });
  });
});
