import { expect } from "chai";
import { Code, ConnectError } from "@connectrpc/connect";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { NetworkService } from "../../gen/es/rock/networks/v1/networks_pb.js";
import { nodeTag } from "../../src/cluster/session-ids.js";
import { freePort } from "../networks/server-support.js";
import { connectClient, rest } from "../support/clients.js";
import { spawnRock, untilAnswers, type RockProcess } from "../support/rock-process.js";

const CATALOG_USERS = "admin:admin:administrator,manager,catalog-administrator;user:user:user";

/** Two nodes that know each other; node-a serves the catalogue. */
async function pair(): Promise<[RockProcess, RockProcess]> {
  const [pa, pb] = [await freePort(), await freePort()];
  const peers = `node-a=http://127.0.0.1:${pa},node-b=http://127.0.0.1:${pb}`;
  const env = (id: string) => ({
    ROCK_ID: id,
    ROCK_PEERS: peers,
    ROCK_CATALOG_NODE: "node-a",
    ROCK_USERS: CATALOG_USERS,
    ROCK_R_SPARE_SESSIONS: "1",
  });
  const a = await spawnRock(env("node-a"), { port: pa });
  const b = await spawnRock(env("node-b"), { port: pb });
  await Promise.all([untilAnswers(a.url, "/_check", 200), untilAnswers(b.url, "/_check", 200)]);
  return [a, b];
}

const as = (user: string) => ({ user, password: user });
const rscript = (text: string) => ({ contentType: "application/x-rscript", data: new TextEncoder().encode(text) });

describe("cluster: a node passes a call on to the node that holds its session", function () {
  this.timeout(90_000);
  let a: RockProcess;
  let b: RockProcess;
  let id: string;

  before(async () => {
    [a, b] = await pair();
    const created = await rest(a.url, "POST", "/r/sessions", as("user"));
    expect(created.status).to.equal(201);
    id = created.json<{ id: string }>().id;
  });
  after(async () => {
    await a?.kill();
    await b?.kill();
  });

  it("names the node in the session id: its first 8 hex digits are the node's tag, the rest a UUID's", () => {
    expect(id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(id.slice(0, 8)).to.equal(nodeTag("node-a"));
  });

  it("serves REST calls of node-a's session through node-b: eval (JSON and R serialization), assign, session, files", async () => {
    const script = { ...as("user"), headers: { "content-type": "application/x-rscript", accept: "application/json" } };
    expect((await rest(b.url, "POST", `/r/session/${id}/_assign?s=x`, { ...script, body: "40" })).status).to.equal(200);
    const evaluated = await rest(b.url, "POST", `/r/session/${id}/_eval`, { ...script, body: "x + 2" });
    expect(evaluated.status, evaluated.text).to.equal(200);
    expect(evaluated.text).to.equal("42");
    const rds = await rest(b.url, "POST", `/r/session/${id}/_eval`, {
      ...as("user"),
      headers: { "content-type": "application/x-rscript", accept: "application/octet-stream" },
      body: "x",
    });
    expect(rds.headers.get("content-type")).to.equal("application/octet-stream");
    expect(rds.bytes.subarray(0, 2).toString()).to.equal("X\n");
    const session = await rest(b.url, "GET", `/r/session/${id}`, as("user"));
    expect(session.json<{ id: string }>().id).to.equal(id);
    const form = new FormData();
    form.set("file", new Blob(["hello across nodes"]), "greeting.txt");
    const up = await fetch(`${b.url}/r/session/${id}/_upload`, {
      method: "POST",
      headers: { authorization: `Basic ${Buffer.from("user:user").toString("base64")}` },
      body: form,
    });
    expect(up.status, await up.clone().text()).to.equal(200);
    const down = await rest(b.url, "GET", `/r/session/${id}/_download?path=greeting.txt`, as("user"));
    expect(down.text).to.equal("hello across nodes");
    // What node-a holds is what node-b read.
    expect((await rest(a.url, "POST", `/r/session/${id}/_eval`, { ...script, body: "readLines('greeting.txt')" })).text).to.equal(
      '"hello across nodes"',
    );
  });

  it("serves gRPC and Connect calls of node-a's session through node-b, streams included", async () => {
    const grpc = connectClient(RService, b.port, "grpc", "user");
    const answer = await grpc.eval({ id, script: rscript("x * 2"), accept: "application/json" });
    expect(answer.answer.case).to.equal("value");
    expect(Buffer.from(answer.answer.case === "value" ? answer.answer.value.data : []).toString()).to.equal("80");
    const output: string[] = [];
    for await (const m of grpc.execute({ id, script: rscript("cat('one\\n'); cat('two\\n'); 3"), accept: "application/json" })) {
      if (m.event.case === "output") output.push(m.event.value);
    }
    expect(output.join("")).to.equal("one\ntwo\n");
    const connect = connectClient(RService, b.port, "connect", "user");
    expect((await connect.getSession({ id })).session?.id).to.equal(id);
  });

  it("passes on only callers it authenticated: wrong credentials are refused by the node called, node-a never sees them", async () => {
    const before = a.log().split("\n").length;
    const other = await rest(b.url, "GET", `/r/session/${id}`, { user: "admin", password: "wrong" });
    expect(other.status).to.equal(401);
    expect(
      a
        .log()
        .split("\n")
        .slice(before - 1)
        .join("\n"),
    ).to.not.include("GetSession");
  });

  it("serves the catalogue of node-a through node-b (REST and gRPC), node-b keeping none", async () => {
    const created = await rest(b.url, "POST", "/ws/draft/networks", {
      ...as("admin"),
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: [{ lang: "en", value: "Across" }], acronym: [{ lang: "en", value: "ACR" }] }),
    });
    expect(created.status, created.text).to.equal(201);
    const onA = await rest(a.url, "GET", "/ws/draft/network/acr", as("admin"));
    expect(onA.status).to.equal(200);
    const listed = await connectClient(NetworkService, b.port, "grpc", "admin").listNetworks({});
    expect(listed.networks.map((n) => n.id)).to.include("acr");
  });

  it("answers 503 / UNAVAILABLE saying that the node holding the session cannot be reached, never 404, once it is gone", async () => {
    await a.kill();
    const gone = await rest(b.url, "POST", `/r/session/${id}/_eval`, {
      ...as("user"),
      headers: { "content-type": "application/x-rscript" },
      body: "1",
    });
    expect(gone.status, gone.text).to.equal(503);
    expect(gone.json<{ message: string }>().message).to.match(
      new RegExp(`R session ${id} is held by node node-a \\(http://127.0.0.1:\\d+\\), which cannot be reached now`),
    );
    const error = await connectClient(RService, b.port, "grpc", "user")
      .eval({ id, script: rscript("1") })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(error?.code).to.equal(Code.Unavailable);
    expect(error?.rawMessage).to.include("held by node node-a");
    // A session of its own still works on node-b.
    const mine = await rest(b.url, "POST", "/r/sessions", as("user"));
    expect(mine.status).to.equal(201);
    expect(mine.json<{ id: string }>().id.slice(0, 8)).to.equal(nodeTag("node-b"));
  });
});

describe("cluster: a peer that never answers", function () {
  this.timeout(60_000);
  let node: RockProcess | undefined;
  let silent: import("node:net").Server | undefined;
  const sockets = new Set<import("node:net").Socket>();
  after(async () => {
    await node?.kill();
    for (const s of sockets) s.destroy();
    silent?.close();
  });

  it("leaves it out of the session list after a bound instead of holding the list", async () => {
    const { createServer } = await import("node:net");
    silent = createServer((s) => {
      sockets.add(s);
      s.on("error", () => undefined);
    });
    await new Promise<void>((resolve) => silent!.listen(0, "127.0.0.1", resolve));
    const port = await freePort();
    const silentUrl = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    node = await spawnRock(
      {
        ROCK_ID: "node-a",
        ROCK_PEERS: `node-a=http://127.0.0.1:${port},node-z=${silentUrl}`,
        ROCK_USERS: CATALOG_USERS,
        ROCK_R_SPARE_SESSIONS: "0",
      },
      { port },
    );
    await untilAnswers(node.url, "/_check", 200);
    const id = (await rest(node.url, "POST", "/r/sessions", as("user"))).json<{ id: string }>().id;
    const t = Date.now();
    const listed = await rest(node.url, "GET", "/r/sessions", as("user"));
    expect(listed.status).to.equal(200);
    expect(listed.json<Array<{ id: string }>>().map((s) => s.id)).to.deep.equal([id]);
    expect(Date.now() - t).to.be.lessThan(8_000);
    expect(sockets.size, "the silent peer was asked").to.be.greaterThan(0);
  });
});
