import { expect } from "chai";
import parsePrometheus, { type Family } from "parse-prometheus-text-format";
import { loadConfig } from "../../src/config/load.js";
import { metadataFor, rest, serveWithClients } from "../support/clients.js";
import { startTestServer } from "../support/server.js";

type Labels = Record<string, string>;

describe("GET /metrics", function () {
  this.timeout(60_000);
  const served = serveWithClients({ r: { startOnBoot: true } });

  async function scrape(): Promise<Family[]> {
    const res = await rest(served.server.url, "GET", "/metrics", { user: "manager" });
    expect(res.status, res.text).to.equal(200);
    expect(res.headers.get("content-type")).to.match(/^text\/plain; version=0\.0\.4/);
    return parsePrometheus(res.text);
  }

  /**
   * The sum of a family's samples whose labels include `labels` (observations for a histogram: its
   * +Inf bucket; this parser drops a histogram's other labels, so histograms are summed whole).
   */
  function total(families: Family[], name: string, labels: Labels = {}): number {
    const family = families.find((f) => f.name === name);
    if (!family) return 0;
    return family.metrics
      .filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
      .reduce((sum, m) => sum + Number(m.value ?? m.buckets?.["+Inf"] ?? 0), 0);
  }

  it("is refused to anonymous callers (401) and to users without administrator or manager (403)", async () => {
    const anonymous = await rest(served.server.url, "GET", "/metrics");
    expect(anonymous.status).to.equal(401);
    expect(anonymous.headers.get("www-authenticate")).to.match(/^Basic realm=/);
    expect((await rest(served.server.url, "GET", "/metrics", { user: "user" })).status).to.equal(403);
    expect((await rest(served.server.url, "GET", "/metrics", { user: "nobody" })).status).to.equal(403);
    expect((await rest(served.server.url, "GET", "/metrics", { user: "admin", password: "wrong" })).status).to.equal(401);
    expect((await rest(served.server.url, "GET", "/metrics", { user: "admin" })).status).to.equal(200);
    expect((await rest(served.server.url, "POST", "/metrics", { user: "admin" })).status).to.equal(405);
  });

  it("counts calls per RPC and protocol, evaluations, sessions and catalogue writes as real calls happen", async () => {
    const before = await scrape();
    const evalRest = { service: "rock.r.v1.RService", method: "EvalStream", protocol: "rest", code: "ok" };
    const evalGrpc = { ...evalRest, method: "Eval", protocol: "grpc" };

    const session = await rest(served.server.url, "POST", "/r/sessions", { user: "user" });
    const id = session.json<{ id: string }>().id;
    const evaluated = await rest(served.server.url, "POST", `/r/session/${id}/_eval`, {
      user: "user",
      body: "1+1",
      headers: { "content-type": "application/x-rscript" },
    });
    expect(evaluated.status).to.equal(200);
    expect((await rest(served.server.url, "GET", `/no/route/${id}`)).status).to.equal(404);
    await new Promise<void>((resolve, reject) =>
      served.clients.r.eval(
        {
          id,
          script: { contentType: "application/x-rscript", data: Buffer.from("2+2"), extensions: [] },
          accept: "application/json",
          async: false,
        },
        metadataFor("user"),
        (e) => (e ? reject(e) : resolve()),
      ),
    );
    const created = await rest(served.server.url, "POST", "/ws/draft/networks", {
      user: "cadmin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: "metrics1", name: [{ lang: "en", value: "Metrics" }] }),
    });
    expect(created.status).to.equal(201);
    const during = await scrape();
    await rest(served.server.url, "DELETE", `/r/session/${id}`, { user: "user" });

    const moved = (name: string, labels: Labels = {}) => total(during, name, labels) - total(before, name, labels);
    expect(moved("rock_rpc_requests_total", evalRest)).to.equal(1);
    expect(moved("rock_rpc_requests_total", evalGrpc)).to.equal(1);
    const evalBytes = { service: "rock.r.v1.RService", method: "EvalStream", protocol: "rest" };
    expect(moved("rock_rpc_bytes_total", { ...evalBytes, direction: "in" })).to.equal(3);
    expect(moved("rock_rpc_bytes_total", { ...evalBytes, direction: "out" })).to.equal(evaluated.bytes.length);
    expect(moved("rock_rpc_requests_total", { service: "unrouted", method: "unrouted", protocol: "rest", code: "not_found" })).to.equal(1);
    expect(during.find((f) => f.name === "rock_rpc_duration_seconds")?.type).to.equal("HISTOGRAM");
    expect(moved("rock_r_evaluations_total", { code: "ok" })).to.equal(2);
    expect(moved("rock_r_evaluation_duration_seconds")).to.equal(2);
    expect(moved("rock_r_sessions_opened_total")).to.equal(1);
    expect(total(during, "rock_r_sessions_open")).to.equal(1);
    expect(moved("rock_catalog_operations_total", { kind: "write", code: "ok" })).to.equal(1);
    expect(total(during, "rock_r_server_starts_total", { restart: "false" })).to.equal(1);
    expect(total(during, "process_cpu_seconds_total")).to.be.greaterThan(0);
    // Bounded labels: no session id anywhere in the labels, not even from a path that reached no RPC.
    const labelValues = during.flatMap((f) => f.metrics.flatMap((m) => Object.values(m.labels ?? {})));
    expect(labelValues.filter((v) => v.includes(id))).to.deep.equal([]);
  });
});

describe("metrics.enabled: false", function () {
  this.timeout(60_000);

  it("keeps no metrics: GET /metrics answers 404, the calls still answer", async () => {
    const server = await startTestServer({ metrics: { enabled: false } });
    try {
      const url = server.url;
      expect((await rest(url, "GET", "/metrics", { user: "admin" })).status).to.equal(404);
      expect((await rest(url, "GET", "/_info")).status).to.equal(200);
    } finally {
      await server.stop();
    }
  });

  it("is read from metrics.enabled / ROCK_METRICS_ENABLED; a value that is not a boolean stops the start naming it", () => {
    expect(loadConfig(undefined, {}).metrics).to.deep.equal({ enabled: true });
    expect(loadConfig(undefined, { ROCK_METRICS_ENABLED: "false" }).metrics).to.deep.equal({ enabled: false });
    expect(() => loadConfig(undefined, { ROCK_METRICS_ENABLED: "off-ish" })).to.throw(
      /metrics\.enabled \(ROCK_METRICS_ENABLED\): expected true or false/,
    );
  });
});
