import { expect } from "chai";
import http from "node:http";
import { startTestServer, basic, type TestServer } from "../support/server.js";
import { call, grpcClients, metadataFor, rest } from "../support/clients.js";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import type { EvalResponse, UploadFileRequest } from "../../gen/grpc-js/rock/r/v1/rservice.js";
import { until } from "./support.js";

const RSCRIPT = { "content-type": "application/x-rscript" };

/** Sends a REST eval and drops the connection once the server has it; resolves when dropped. */
function evalThenLeave(server: TestServer, id: string, code: string, user: string): Promise<void> {
  return new Promise((resolve) => {
    const req = http.request(`${server.url}/r/session/${id}/_eval`, {
      method: "POST",
      headers: { ...RSCRIPT, authorization: basic(user) },
    });
    req.on("error", () => resolve());
    req.end(code, () =>
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 300),
    );
  });
}

describe("limits of sessions and calls over REST and gRPC", function () {
  this.timeout(60_000);
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ r: { startOnBoot: true, maxSessions: 3, maxSessionsPerUser: 2, interruptGraceSeconds: 1 } });
  });
  after(async () => server?.stop());

  const newSession = (user: string) => rest(server.url, "POST", "/r/sessions", { user, headers: { "content-type": "application/json" } });
  const evalR = (id: string, code: string, user: string) =>
    rest(server.url, "POST", `/r/session/${id}/_eval`, { user, body: code, headers: RSCRIPT });
  const endSession = (id: string, user: string) => rest(server.url, "DELETE", `/r/session/${id}`, { user });

  it("answers 429 with a message past the sessions per user and in total, and again 201 once one closes", async () => {
    const mine = [await newSession("user"), await newSession("user")];
    for (const res of mine) expect(res.status, res.text).to.equal(201);
    const third = await newSession("user");
    expect(third.status).to.equal(429);
    expect(third.json<{ message: string }>().message).to.match(/user has 2 open sessions, the limit per user is 2/);

    const other = await newSession("user2");
    expect(other.status).to.equal(201);
    const past = await newSession("user2");
    expect(past.status).to.equal(429);
    expect(past.json<{ message: string }>().message).to.match(/limit of 3 open sessions/);

    const grpc = grpcClients(server.port);
    try {
      const error = await call((cb) => grpc.r.createSession({}, metadataFor("admin"), cb)).then(
        () => undefined,
        (e: { code: number; details: string }) => e,
      );
      expect(error?.code).to.equal(8); // RESOURCE_EXHAUSTED
      expect(error?.details).to.match(/limit of 3 open sessions/);
    } finally {
      grpc.close();
    }

    expect((await endSession(mine[0]!.json<{ id: string }>().id, "user")).status).to.equal(204);
    const again = await newSession("user");
    expect(again.status).to.equal(201);
    for (const res of [mine[1]!, other, again]) await endSession(res.json<{ id: string }>().id, res === other ? "user2" : "user");
  });

  it("interrupts a REST evaluation whose client went away; the session stays usable", async () => {
    const id = (await newSession("user")).json<{ id: string }>().id;
    await evalR(id, "kept <- 7", "user");
    await evalThenLeave(server, id, "repeat {}", "user");
    // Without the interrupt, this would wait behind `repeat {}` for ever.
    const after = await evalR(id, "kept", "user");
    expect(after.status, after.text).to.equal(200);
    expect(after.text).to.equal("7");
    await endSession(id, "user");
  });

  it("interrupts a gRPC evaluation whose deadline passed", async () => {
    const id = (await newSession("user")).json<{ id: string }>().id;
    const grpc = grpcClients(server.port);
    try {
      const error = await call<EvalResponse>((cb) =>
        grpc.r.eval(
          {
            id,
            script: { contentType: "application/x-rscript", data: Buffer.from("repeat {}"), extensions: [] },
            accept: "",
            async: false,
          },
          metadataFor("user"),
          { deadline: Date.now() + 500 },
          cb,
        ),
      ).then(
        () => undefined,
        (e: { code: number }) => e,
      );
      expect(error?.code).to.equal(4); // DEADLINE_EXCEEDED
      const after = await evalR(id, "1 + 1", "user");
      expect(after.text).to.equal("2");
    } finally {
      grpc.close();
      await endSession(id, "user");
    }
  });

  it("ends a session whose code ignores the interrupt once its client went away", async () => {
    const id = (await newSession("user")).json<{ id: string }>().id;
    await evalThenLeave(server, id, "repeat tryCatch(Sys.sleep(10), interrupt = function(i) NULL)", "user");
    await until(async () => (await rest(server.url, "GET", `/r/session/${id}`, { user: "user" })).status === 404, 15_000);
  });

  it("commits nothing of a gRPC upload the client cancelled, and leaves no staging file", async () => {
    const id = (await newSession("user")).json<{ id: string }>().id;
    const grpc = grpcClients(server.port);
    try {
      const message = (m: Partial<UploadFileRequest>): UploadFileRequest => ({ id: "", ...m });
      const ended = new Promise<number | undefined>((resolve) => {
        const upload = grpc.r.uploadFile(metadataFor("user"), (err: { code: number } | null) => resolve(err?.code));
        upload.write(message({ id, path: "partial.bin" }));
        upload.write(message({ chunk: { contentType: "application/octet-stream", data: Buffer.alloc(100_000, 1), extensions: [] } }));
        setTimeout(() => upload.cancel(), 300);
      });
      expect(await ended).to.equal(1); // CANCELLED
      const home = join(server.dataDir, "sessions", id);
      await until(async () => (await readdir(home)).length === 3);
      expect((await readdir(home)).sort()).to.deep.equal(["library", "tmp", "work"]);
      expect(await readdir(join(home, "work"))).to.deep.equal([]);
    } finally {
      grpc.close();
      await endSession(id, "user");
    }
  });
});
