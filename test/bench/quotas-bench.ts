/**
 * What confining a session costs: session creation and `1+1` on two servers of the same run that differ
 * in one setting, interleaved rounds — r.quotas auto vs off (a control group per session,
 * src/r/confine/quotas.ts) and r.sessionFilesystem minimal vs host (a root of its own per session,
 * src/r/sandbox). Creation is measured with spare sessions off (each session forked, confined, on the
 * caller's time) and, for quotas, on (the default: a spare taken, its replacement forked in the
 * background).
 */
import { openCgroupTree } from "../../src/r/confine/cgroups.js";
import { hasCapability, SYS_ADMIN } from "../../src/r/confine/capabilities.js";
import { HttpClient } from "./http-client.js";
import { ms, section, times, verdict, type Section } from "./report.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";
import { sampleInterleaved } from "./stats.js";

export interface QuotasBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

/** One setting compared: the environment of the server with it and of the one without. */
interface Comparison {
  readonly what: string;
  readonly with: Readonly<Record<string, string>>;
  readonly without: Readonly<Record<string, string>>;
  readonly reference: string;
}

export async function runQuotasBench(o: QuotasBenchOptions): Promise<Section[]> {
  const s = section("Confining sessions: quotas and a minimal root vs none, same run");
  const n = o.quick ? 40 : 200;
  const quotas: Comparison = {
    what: "quotas",
    with: { ROCK_R_QUOTAS: "auto" },
    without: { ROCK_R_QUOTAS: "off" },
    reference: "without quotas",
  };
  const probe = process.getuid?.() === 0 ? openCgroupTree(`rock-bench-probe-${process.pid}`, 0) : { unavailable: "not root" };
  if (!("unavailable" in probe)) {
    await probe.close();
    for (const spares of ["0", "8"]) await compare(s, quotas, spares, n, o);
  } else s.notes.push(`quotas skipped: no quotas here (${probe.unavailable})`);
  if (process.getuid?.() === 0 && hasCapability(SYS_ADMIN)) {
    const filesystem: Comparison = {
      what: "minimal root",
      with: { ROCK_R_SESSION_FILESYSTEM: "minimal" },
      without: { ROCK_R_SESSION_FILESYSTEM: "host" },
      reference: "host's file system",
    };
    await compare(s, filesystem, "0", n, o);
  } else s.notes.push("minimal root skipped: it needs root and CAP_SYS_ADMIN");
  s.notes.push(
    `${n} sessions created and deleted per server in 10 interleaved rounds (creation timed alone, then with its DELETE), two servers as production runs them, differing in one setting; eval: 10 interleaved rounds.`,
  );
  return [s];
}

async function compare(s: Section, c: Comparison, spares: string, n: number, o: QuotasBenchOptions): Promise<void> {
  o.log(`${c.what}: sessions with r.spareSessions ${spares}`);
  const servers: ServerProcess[] = [];
  try {
    for (const env of [c.with, c.without])
      servers.push(await startServerProcess({ rStart: true, env: { ...env, ROCK_R_SPARE_SESSIONS: spares, ROCK_LOG_LEVEL: "warn" } }));
    const [on, off] = servers.map((server) => new HttpClient(server.port, "admin")) as [HttpClient, HttpClient];
    const openSession = async (http: HttpClient) =>
      (JSON.parse((await http.request("POST", "/r/sessions")).body.toString("utf8")) as { id: string }).id;
    // Whole cycles too (the DELETE's answer included), of the timed rounds: without quotas a session's
    // end finds its processes in /proc, with them in its group.
    const cycles: Record<"on" | "off", number[]> = { on: [], off: [] };
    const create = (http: HttpClient, side?: "on" | "off") => async () => {
      const t = performance.now();
      const id = await openSession(http);
      const elapsed = performance.now() - t;
      await http.request("DELETE", `/r/session/${id}`);
      if (side) cycles[side].push(performance.now() - t);
      return elapsed;
    };
    // Creation alone is timed inside (the DELETE after it is not): samples are the returned times.
    await sampleInterleaved({ on: create(on), off: create(off) }, 10, 5, 1);
    const samples: Record<"on" | "off", number[]> = { on: [], off: [] };
    for (let r = 0; r < 10; r++) {
      for (let i = 0; i < n / 10; i++) samples.on.push(await create(on, "on")());
      for (let i = 0; i < n / 10; i++) samples.off.push(await create(off, "off")());
      // Spares fork again between rounds, as between real clients' demands.
      if (spares !== "0") await new Promise((r) => setTimeout(r, 300));
    }
    const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const [a, b] = [p50(samples.on), p50(samples.off)];
    s.rows.push({
      figure: `session creation p50 with ${c.what}, r.spareSessions ${spares}${spares === "0" ? " (forked on the call)" : ""}`,
      value: ms(a),
      reference: `${ms(b)} ${c.reference}`,
      ratio: times(a / b),
      target: "≤ 1.2×",
      verdict: verdict(a / b <= 1.2),
    });
    const [ca, cb] = [p50(cycles.on), p50(cycles.off)];
    s.rows.push({
      figure: `session create + delete p50 with ${c.what}, r.spareSessions ${spares}`,
      value: ms(ca),
      reference: `${ms(cb)} ${c.reference}`,
      ratio: times(ca / cb),
    });
    const [x, y] = [await openSession(on), await openSession(off)];
    const evalOf = (http: HttpClient, sid: string) => () =>
      http.request("POST", `/r/session/${sid}/_eval`, {
        headers: { "content-type": "application/x-rscript", accept: "application/json" },
        body: "1+1",
      });
    const e = await sampleInterleaved({ on: evalOf(on, x), off: evalOf(off, y) }, o.quick ? 500 : 3000, 100);
    s.rows.push({
      figure: `eval 1+1 over REST p50 with ${c.what} (node:http client)`,
      value: ms(e.on.p50),
      reference: `${ms(e.off.p50)} ${c.reference}`,
      ratio: times(e.on.p50 / e.off.p50),
    });
  } finally {
    for (const server of servers) await server.stop();
  }
}
