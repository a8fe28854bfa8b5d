/**
 * What r.sessionNetwork restricted costs against host: two servers of the same run in one network
 * namespace the bench makes (test/support/netns/topology.ts: the forwarding and the table it turns on
 * stay there), differing in that setting alone. Session creation forked on the call (r.spareSessions 0:
 * the network namespace, its link and addresses on the caller's time) and with spares (the default: a
 * hand-over), a resume (suspend, then the first call, which forks the session again), and `1+1`.
 */
import { hasCapability, NET_ADMIN, SYS_ADMIN } from "../../src/r/confine/capabilities.js";
import { onPath } from "../../src/r/confine/on-path.js";
import { TestTopology } from "../support/netns/topology.js";
import { HttpClient } from "./http-client.js";
import { ms, section, times, verdict, type Section } from "./report.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";
import { sampleInterleaved } from "./stats.js";

export interface NetworkBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

type Side = "restricted" | "host";

export async function runNetworkBench(o: NetworkBenchOptions): Promise<Section[]> {
  const s = section("The session network: restricted vs host, same run");
  const missing =
    process.getuid?.() !== 0 || !hasCapability(SYS_ADMIN) || !hasCapability(NET_ADMIN)
      ? "root with CAP_SYS_ADMIN and CAP_NET_ADMIN"
      : !onPath("nft") || !onPath("ip")
        ? "nft and ip"
        : undefined;
  if (missing) {
    s.notes.push(`skipped: it needs ${missing}`);
    return [s];
  }
  const net = TestTopology.make();
  try {
    for (const spares of ["0", "8"]) await creation(s, net, spares, count(o), o);
    await resumeAndEval(s, net, o);
  } finally {
    net.remove();
  }
  s.notes.push(
    `${count(o)} sessions created and deleted per server in 10 interleaved rounds (the DELETE not timed); resumes: ${o.quick ? 10 : 40} per server, interleaved; eval: 10 interleaved rounds. Both servers in one network namespace of the bench's.`,
  );
  return [s];
}

const count = (o: NetworkBenchOptions): number => (o.quick ? 40 : 200);

async function serverPair(net: TestTopology, spares: string): Promise<{ servers: ServerProcess[]; http: Record<Side, HttpClient> }> {
  const servers: ServerProcess[] = [];
  for (const network of ["restricted", "host"] as const) {
    servers.push(
      await startServerProcess({
        rStart: true,
        runner: net.runner,
        host: net.controlAddress,
        env: { ROCK_R_SESSION_NETWORK: network, ROCK_R_SPARE_SESSIONS: spares, ROCK_LOG_LEVEL: "warn" },
      }),
    );
  }
  const [restricted, host] = servers.map((server) => new HttpClient(server.port, "admin", 1, net.controlAddress)) as [
    HttpClient,
    HttpClient,
  ];
  return { servers, http: { restricted, host } };
}

const openSession = async (http: HttpClient): Promise<string> =>
  (JSON.parse((await http.request("POST", "/r/sessions")).body.toString("utf8")) as { id: string }).id;

const p50 = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function creation(s: Section, net: TestTopology, spares: string, count: number, o: NetworkBenchOptions): Promise<void> {
  o.log(`network: session creation with r.spareSessions ${spares}`);
  const { servers, http } = await serverPair(net, spares);
  try {
    const create = (client: HttpClient) => async () => {
      const t = performance.now();
      const id = await openSession(client);
      const elapsed = performance.now() - t;
      await client.request("DELETE", `/r/session/${id}`);
      return elapsed;
    };
    await sampleInterleaved({ on: create(http.restricted), off: create(http.host) }, 10, 5, 1);
    const samples: Record<Side, number[]> = { restricted: [], host: [] };
    for (let r = 0; r < 10; r++) {
      for (const side of ["restricted", "host"] as const)
        for (let i = 0; i < count / 10; i++) samples[side].push(await create(http[side])());
      if (spares !== "0") await new Promise((done) => setTimeout(done, 300));
    }
    const [a, b] = [p50(samples.restricted), p50(samples.host)];
    s.rows.push({
      figure: `session creation p50, r.spareSessions ${spares}${spares === "0" ? " (forked on the call)" : " (a hand-over)"}`,
      value: ms(a),
      reference: `${ms(b)} host`,
      ratio: times(a / b),
      target: "≤ 1.1×",
      verdict: verdict(a / b <= 1.1),
    });
  } finally {
    for (const server of servers) await server.stop();
  }
}

async function resumeAndEval(s: Section, net: TestTopology, o: NetworkBenchOptions): Promise<void> {
  o.log("network: resume and eval");
  const { servers, http } = await serverPair(net, "0");
  try {
    const ids = { restricted: await openSession(http.restricted), host: await openSession(http.host) };
    const evaluate = (side: Side) => () =>
      http[side].request("POST", `/r/session/${ids[side]}/_eval`, {
        headers: { "content-type": "application/x-rscript", accept: "application/json" },
        body: "1+1",
      });
    const resume = (side: Side) => async () => {
      await http[side].request("POST", `/r/session/${ids[side]}/_suspend`);
      const t = performance.now();
      await evaluate(side)();
      return performance.now() - t;
    };
    const rounds = o.quick ? 10 : 40;
    const resumes: Record<Side, number[]> = { restricted: [], host: [] };
    for (let r = 0; r < rounds; r++) for (const side of ["restricted", "host"] as const) resumes[side].push(await resume(side)());
    const [a, b] = [p50(resumes.restricted), p50(resumes.host)];
    s.rows.push({
      figure: "resume p50 (the first call after a suspend: a fork, then _eval of 1+1)",
      value: ms(a),
      reference: `${ms(b)} host`,
      ratio: times(a / b),
      target: "≤ 1.1×",
      verdict: verdict(a / b <= 1.1),
    });
    const e = await sampleInterleaved({ on: evaluate("restricted"), off: evaluate("host") }, o.quick ? 500 : 3000, 100);
    s.rows.push({
      figure: "eval 1+1 over REST p50 (node:http client)",
      value: ms(e.on.p50),
      reference: `${ms(e.off.p50)} host`,
      ratio: times(e.on.p50 / e.off.p50),
      target: "≤ 1.05×",
      verdict: verdict(e.on.p50 / e.off.p50 <= 1.05),
    });
  } finally {
    for (const server of servers) await server.stop();
  }
}
