import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { execa } from "execa";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import { defaults } from "../../src/config/load.js";
import { nodeTag } from "../../src/cluster/session-ids.js";
import { freePort } from "../networks/server-support.js";
import { call, connectClient, grpcClients, metadataFor, rest } from "../support/clients.js";
import type { EvalResponse } from "../../gen/grpc-js/rock/r/v1/rservice.js";
import { ROOT } from "../support/main-process.js";
import { spawnRock, untilAnswers, type RockProcess } from "../support/rock-process.js";

const NODES = ["node1", "node2", "node3"] as const;
const admin = { user: "admin", password: "admin" };
const rscript = (text: string) => ({ contentType: "application/x-rscript", data: new TextEncoder().encode(text) });

/** deploy/cluster.env with its ${VAR} references replaced, as `envsubst < deploy/cluster.env` gives it. */
function clusterEnv(vars: Record<string, string>): Record<string, string> {
  const text = readFileSync(join(ROOT, "deploy/cluster.env"), "utf8").replace(/\$\{(\w+)\}/g, (_, name: string) => vars[name] ?? "");
  return Object.fromEntries(
    text
      .split("\n")
      .filter((l) => l.trim() !== "" && !l.startsWith("#"))
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
}

/** Which node a session id says holds it. */
const nodeOf = (id: string) => NODES.find((n) => id.startsWith(nodeTag(n)));

describe("cluster: three nodes behind HAProxy with deploy/haproxy.cfg, stock clients", function () {
  this.timeout(180_000);
  const ports: Record<string, number> = {};
  const nodes: Record<string, RockProcess> = {};
  let vars: Record<string, string>;
  let haproxy: ChildProcess;
  /** What HAProxy wrote on stderr: its warnings, a server going DOWN among them. */
  let said = "";
  let lb: string;
  let lbPort: number;

  /** Resolves once HAProxy has said `line` (`Server nodes/node2 is DOWN`) past `said[from]`. */
  const untilSaid = async (line: string, from: number, ms: number): Promise<void> => {
    const end = Date.now() + ms;
    while (said.indexOf(line, from) < 0) {
      if (Date.now() > end) throw new Error(`HAProxy did not say '${line}' within ${ms} ms: ${said}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  /** Nodes stopped and started again: their first process, ended with the rest at the end. */
  const retired: RockProcess[] = [];

  /** `again`: the node's earlier process, whose data folder and uids it starts on. */
  const startNode = async (id: string, again?: RockProcess): Promise<RockProcess> => {
    const node = await spawnRock((port) => ({ ...clusterEnv(vars), ROCK_ID: id, ROCK_SERVER: `http://127.0.0.1:${port}` }), {
      port: ports[id]!,
      ...(again ? { dataDir: again.dataDir, uids: again.uids } : {}),
    });
    if (again) retired.push(again);
    nodes[id] = node;
    await untilAnswers(node.url, "/_check", 200);
    return node;
  };

  before(async () => {
    for (const id of NODES) ports[id] = await freePort();
    lbPort = await freePort();
    vars = {
      ROCK_LB_BIND: `127.0.0.1:${lbPort}`,
      ROCK_NODE1_ADDR: `127.0.0.1:${ports.node1}`,
      ROCK_NODE2_ADDR: `127.0.0.1:${ports.node2}`,
      ROCK_NODE3_ADDR: `127.0.0.1:${ports.node3}`,
    };
    await Promise.all(NODES.map((id) => startNode(id)));
    haproxy = spawn("haproxy", ["-f", join(ROOT, "deploy/haproxy.cfg"), "-db"], {
      env: { ...process.env, ...vars },
      stdio: ["ignore", "ignore", "pipe"],
    });
    haproxy.stderr?.setEncoding("utf8").on("data", (t: string) => (said += t));
    lb = `http://127.0.0.1:${lbPort}`;
    await untilAnswers(lb, "/_check", 200, 20_000).catch((e: Error) => {
      throw new Error(`${e.message}; haproxy said: ${said}`);
    });
  });
  after(async () => {
    if (haproxy && haproxy.exitCode === null) {
      haproxy.kill("SIGKILL");
      await once(haproxy, "exit");
    }
    await Promise.all(Object.values(nodes).map((n) => n.kill()));
    for (const n of retired) await n.kill();
  });

  const sessions: string[] = [];

  it("spreads new sessions over the three nodes", async () => {
    for (let i = 0; i < 9; i++) {
      const created = await rest(lb, "POST", "/r/sessions", admin);
      expect(created.status, created.text).to.equal(201);
      sessions.push(created.json<{ id: string }>().id);
    }
    expect(new Set(sessions.map(nodeOf))).to.deep.equal(new Set(NODES));
  });

  it("serves every session's calls through HAProxy, whichever node gets them: REST, Connect-ES over gRPC, grpc-js, buf curl", async () => {
    const grpc = connectClient(RService, lbPort, "grpc", "admin");
    for (const id of sessions) {
      const evaluated = await rest(lb, "POST", `/r/session/${id}/_eval`, {
        ...admin,
        headers: { "content-type": "application/x-rscript", accept: "application/json" },
        body: "Sys.getpid() > 0",
      });
      expect(evaluated.text, `${id} over REST`).to.equal("true");
      for (let i = 0; i < 3; i++) {
        const answer = await grpc.eval({ id, script: rscript("1+1"), accept: "application/json" });
        expect(answer.answer.case === "value" ? Buffer.from(answer.answer.value.data).toString() : "", `${id} over gRPC`).to.equal("2");
      }
    }
    // grpc-js (h2c through HAProxy) and buf curl, as their users call them.
    const grpcJs = grpcClients(lbPort);
    try {
      for (const id of sessions) {
        const answer = await call<EvalResponse>((cb) =>
          grpcJs.r.eval(
            {
              id,
              async: false,
              script: { contentType: "application/x-rscript", data: Buffer.from("3*3"), extensions: [] },
              accept: "application/json",
            },
            metadataFor("admin", "admin"),
            cb,
          ),
        );
        expect(answer.value?.data.toString(), `${id} over grpc-js`).to.equal("9");
      }
    } finally {
      grpcJs.close();
    }
    const buf = await execa(join(ROOT, "node_modules/.bin/buf"), [
      "curl",
      "--http2-prior-knowledge",
      "-H",
      `Authorization: Basic ${Buffer.from("admin:admin").toString("base64")}`,
      "-d",
      JSON.stringify({
        id: sessions[0],
        script: { contentType: "application/x-rscript", data: Buffer.from("6*7").toString("base64") },
        accept: "application/json",
      }),
      `${lb}/rock.r.v1.RService/Eval`,
    ]);
    expect(Buffer.from((JSON.parse(buf.stdout) as { value: { data: string } }).value.data, "base64").toString()).to.equal("42");
    // The list is the cluster's: every node's sessions, whichever node answers.
    const listed = (await rest(lb, "GET", "/r/sessions", admin)).json<Array<{ id: string }>>().map((s) => s.id);
    expect(listed).to.include.members(sessions);
  });

  it("works for rockr (the CRAN client, unchanged) through HAProxy", async () => {
    const r = await execa("Rscript", ["--vanilla", join(ROOT, "test/interop/rockr-client.R")], {
      env: { R_LIBS: defaults().r.setupLibrary, ROCK_URL: lb, ROCKR_PART: "session", ROCKR_BALANCED: "1" },
      reject: false,
      timeout: 120_000,
    });
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0);
    for (const check of ["eval raw", "sessions lists it", "command result", "download gives the same bytes", "close"])
      expect(r.stdout).to.include(`ok ${check}`);
  });

  it("brings a node SIGTERMed and started again on its data folder back with its sessions: 503 while it is down, their values after", async () => {
    const held = sessions.filter((id) => nodeOf(id) === "node3");
    expect(held.length).to.be.greaterThan(0);
    const evaluate = (id: string, body: string) =>
      rest(lb, "POST", `/r/session/${id}/_eval`, { ...admin, headers: { "content-type": "application/x-rscript" }, body });
    for (const id of held) expect((await evaluate(id, `kept <- "${id}"; TRUE`)).status).to.equal(200);
    const before = nodes.node3!;
    process.kill(before.pid, "SIGTERM");
    const exit = await before.exited;
    expect(exit.code, before.log()).to.equal(0);
    const down = await evaluate(held[0]!, "kept");
    expect(down.status, down.text).to.equal(503);
    await startNode("node3", before);
    for (const id of held) {
      const back = await evaluate(id, "kept");
      expect(back.status, back.text).to.equal(200);
      expect(back.json()).to.equal(id);
    }
  });

  it("stops sending new sessions to a node killed with SIGKILL within 10 s; the others' keep answering, the dead one's get a clear error", async () => {
    const dead = sessions.filter((id) => nodeOf(id) === "node2");
    const alive = sessions.filter((id) => nodeOf(id) !== "node2");
    expect(dead.length).to.be.greaterThan(0);
    const killedAt = Date.now();
    const from = said.length;
    await nodes.node2!.kill();
    // HAProxy checks /_check every 2 s and takes a node out after 2 failures: new sessions go to the
    // backend `nodes`, which says so once it has.
    await untilSaid("Server nodes/node2 is DOWN", from, 10_000);
    const fresh: string[] = [];
    for (let i = 0; i < 6; i++) fresh.push((await rest(lb, "POST", "/r/sessions", admin)).json<{ id: string }>().id);
    expect(Date.now() - killedAt).to.be.lessThan(15_000);
    expect(fresh.map(nodeOf)).to.not.include("node2");
    for (const id of alive) {
      const answer = await rest(lb, "POST", `/r/session/${id}/_eval`, {
        ...admin,
        headers: { "content-type": "application/x-rscript" },
        body: "1",
      });
      expect(answer.status, `${id}: ${answer.text}`).to.equal(200);
    }
    const lost = await rest(lb, "POST", `/r/session/${dead[0]}/_eval`, {
      ...admin,
      headers: { "content-type": "application/x-rscript" },
      body: "1",
    });
    expect(lost.status, lost.text).to.equal(503);
    expect(lost.json<{ message: string }>().message).to.include(`is held by node node2`).and.include("cannot be reached");
    const overGrpc = await connectClient(RService, lbPort, "grpc", "admin")
      .eval({ id: dead[0]!, script: rscript("1") })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(overGrpc?.code).to.equal(Code.Unavailable);
    expect(overGrpc?.rawMessage).to.include("held by node node2");
    sessions.push(...fresh);
  });

  it("serves again from the node once it is restarted", async () => {
    await startNode("node2");
    const seen = new Set<string | undefined>();
    const end = Date.now() + 20_000;
    while (!seen.has("node2") && Date.now() < end) {
      const created = await rest(lb, "POST", "/r/sessions", admin);
      if (created.status === 201) seen.add(nodeOf(created.json<{ id: string }>().id));
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(seen.has("node2"), "a new session on node2").to.equal(true);
  });
});
