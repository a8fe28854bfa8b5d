import { expect } from "chai";
import type * as grpcJs from "@grpc/grpc-js";
import { startTestServer, type TestServer } from "../support/server.js";
import { rest, grpcClients, metadataFor } from "../support/clients.js";

type Clients = ReturnType<typeof grpcClients>;
type Callback = (err: grpcJs.ServiceError | null) => void;

/** One endpoint of the matrix, as a REST request and as the same RPC over @grpc/grpc-js. */
interface Endpoint {
  readonly name: string;
  readonly rest: readonly [method: string, path: string, body?: string];
  readonly grpc: (c: Clients, md: grpcJs.Metadata, cb: Callback) => unknown;
  /** Users allowed, with the success status; everyone else authenticated gets `refused`. */
  readonly allowed: Readonly<Record<string, number>>;
  /** 403 unless the contract says otherwise (the index rebuilds: "401: no permission"). */
  readonly refused?: 401 | 403;
}

const EVERYONE = ["admin", "manager", "user", "cadmin", "reviewer", "editor", "nobody"];
const jsonNet = (acronym: string) => JSON.stringify({ name: [{ lang: "en", value: acronym }], acronym: [{ lang: "en", value: acronym }] });
let counter = 0;

const ENDPOINTS: readonly Endpoint[] = [
  {
    name: "GET /r/sessions",
    rest: ["GET", "/r/sessions"],
    grpc: (c, md, cb) => c.r.listSessions({}, md, cb),
    allowed: Object.fromEntries(EVERYONE.map((u) => [u, 200])),
  },
  {
    name: "POST /r/sessions",
    rest: ["POST", "/r/sessions"],
    grpc: (c, md, cb) => c.r.createSession({}, md, cb),
    allowed: { admin: 201, user: 201 },
  },
  {
    name: "DELETE /r/sessions",
    rest: ["DELETE", "/r/sessions"],
    grpc: (c, md, cb) => c.r.deleteSessions({}, md, cb),
    allowed: { admin: 204, manager: 204 },
  },
  {
    name: "GET /rserver",
    rest: ["GET", "/rserver"],
    grpc: (c, md, cb) => c.r.getServerStatus({}, md, cb),
    allowed: { admin: 200, manager: 200 },
  },
  {
    name: "GET /rserver/_log",
    rest: ["GET", "/rserver/_log?limit=5"],
    grpc: (c, md, cb) => c.r.getLog({ limit: 5 }, md, cb),
    allowed: { admin: 200, manager: 200 },
  },
  {
    name: "GET /ws/draft/networks",
    rest: ["GET", "/ws/draft/networks"],
    grpc: (c, md, cb) => c.networks.listNetworks({ exclude: [] }, md, cb),
    allowed: Object.fromEntries(EVERYONE.map((u) => [u, 200])),
  },
  {
    name: "POST /ws/draft/networks",
    rest: ["POST", "/ws/draft/networks", "NEW"],
    grpc: (c, md, cb) => {
      const a = `g${++counter}`;
      return c.networks.createNetwork(
        {
          network: {
            id: a,
            name: [{ lang: "en", value: a }],
            acronym: [],
            description: [],
            studyIds: [],
            studySummaries: [],
            memberships: [],
            networkIds: [],
          },
        },
        md,
        cb,
      );
    },
    allowed: { cadmin: 201, reviewer: 201, editor: 201 },
  },
  {
    name: "PUT /ws/draft/network/{id}/_publish",
    rest: ["PUT", "/ws/draft/network/base/_publish"],
    grpc: (c, md, cb) => c.networks.publish({ id: "base" }, md, cb),
    allowed: { cadmin: 204, reviewer: 204 },
  },
  {
    name: "PUT /ws/draft/network/{id}/_index",
    rest: ["PUT", "/ws/draft/network/base/_index"],
    grpc: (c, md, cb) => c.networks.indexNetwork({ id: "base" }, md, cb),
    allowed: { cadmin: 204 },
    refused: 401,
  },
  {
    name: "PUT /ws/draft/networks/_index",
    rest: ["PUT", "/ws/draft/networks/_index"],
    grpc: (c, md, cb) => c.networks.rebuildIndex({}, md, cb),
    allowed: { cadmin: 200 },
    refused: 401,
  },
];

const GRPC_CODE: Record<number, number> = { 200: 0, 201: 0, 204: 0, 401: 16, 403: 7 };

describe("roles on every endpoint, REST and gRPC", function () {
  this.timeout(60_000);
  let server: TestServer;
  let clients: Clients;

  before(async () => {
    server = await startTestServer({ r: { startOnBoot: true } });
    clients = grpcClients(server.port);
    const base = await rest(server.url, "POST", "/ws/draft/networks", {
      user: "cadmin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: "base", name: [{ lang: "en", value: "Base" }] }),
    });
    expect(base.status).to.equal(201);
  });
  after(async () => {
    clients.close();
    await server.stop();
  });

  for (const e of ENDPOINTS) {
    for (const user of [...EVERYONE, undefined, "badpassword"]) {
      const expected = user === undefined || user === "badpassword" ? 401 : (e.allowed[user] ?? e.refused ?? 403);
      const who = user ?? "anonymous";
      it(`${e.name} as ${who} → ${expected} (REST)`, async () => {
        const [method, path, body] = e.rest;
        const res = await rest(server.url, method, path, {
          ...(user === "badpassword" ? { user: "admin", password: "wrong" } : user ? { user } : {}),
          ...(body ? { headers: { "content-type": "application/json" }, body: jsonNet(`r${++counter}`) } : {}),
        });
        expect(res.status, res.text).to.equal(expected);
        if (expected === 401) expect(res.headers.get("www-authenticate")).to.match(/^Basic realm=/);
      });
      it(`${e.name} as ${who} → ${expected} (gRPC)`, async () => {
        const md = user === "badpassword" ? metadataFor("admin", "wrong") : metadataFor(user);
        const code = await new Promise<number>((resolve) => e.grpc(clients, md, (err) => resolve(err ? err.code : 0)));
        expect(code).to.equal(GRPC_CODE[expected]);
      });
    }
  }

  it("answers the public endpoints without credentials", async () => {
    const info = await rest(server.url, "GET", "/_info");
    expect(info.status).to.equal(200);
    expect(info.json<{ type: string }>().type).to.equal("rock");
    const check = await rest(server.url, "GET", "/_check");
    expect(check.status).to.equal(200);
  });
});
