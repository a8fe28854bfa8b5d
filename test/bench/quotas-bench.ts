/**
 * What per-session quotas cost (src/r/confine/quotas.ts): session creation and `1+1` on two servers of
 * the same run, one with r.quotas auto (a control group per session), one with r.quotas off, interleaved
 * rounds. Creation is measured with spare sessions off (each session forked, its group made and placed,
 * on the caller's time) and on (the default: a spare taken, its replacement forked in the background).
 */
import { CgroupTree } from "../../src/r/confine/cgroups.js";
import { HttpClient } from "./http-client.js";
import { ms, section, times, verdict, type Section } from "./report.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";
import { sampleInterleaved } from "./stats.js";

export interface QuotasBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

export async function runQuotasBench(o: QuotasBenchOptions): Promise<Section[]> {
  const s = section("Quotas per session: r.quotas auto vs off, same run");
  const probe = process.getuid?.() === 0 ? CgroupTree.open(`rock-bench-probe-${process.pid}`, 0) : { unavailable: "not root" };
  if (!(probe instanceof CgroupTree)) {
    s.notes.push(`skipped: no quotas here (${probe.unavailable})`);
    return [s];
  }
  probe.close();
  const n = o.quick ? 40 : 200;
  for (const spares of ["0", "8"]) {
    o.log(`quotas: sessions with r.spareSessions ${spares}`);
    const servers: ServerProcess[] = [];
    try {
      for (const quotas of ["auto", "off"]) {
        servers.push(await startServerProcess({ rStart: true, env: { ROCK_R_QUOTAS: quotas, ROCK_R_SPARE_SESSIONS: spares, ROCK_LOG_LEVEL: "warn" } }));
      }
      const [withQuotas, without] = servers.map((server) => new HttpClient(server.port, "admin")) as [HttpClient, HttpClient];
      const cycle = (http: HttpClient) => async () => {
        const created = await http.request("POST", "/r/sessions");
        const { id } = JSON.parse(created.body.toString("utf8")) as { id: string };
        await http.request("DELETE", `/r/session/${id}`);
      };
      const create = (http: HttpClient) => async () => {
        const t = performance.now();
        const created = await http.request("POST", "/r/sessions");
        const elapsed = performance.now() - t;
        const { id } = JSON.parse(created.body.toString("utf8")) as { id: string };
        await http.request("DELETE", `/r/session/${id}`);
        return elapsed;
      };
      // Creation alone is timed inside (the DELETE after it is not): samples are the returned times.
      const samples: Record<"quotas" | "off", number[]> = { quotas: [], off: [] };
      await sampleInterleaved({ quotas: cycle(withQuotas), off: cycle(without) }, 10, 5, 1);
      for (let r = 0; r < 10; r++) {
        for (let i = 0; i < n / 10; i++) samples.quotas.push(await create(withQuotas)());
        for (let i = 0; i < n / 10; i++) samples.off.push(await create(without)());
        // Spares fork again between rounds, as between real clients' demands.
        if (spares !== "0") await new Promise((r) => setTimeout(r, 300));
      }
      const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      const [q, off] = [p50(samples.quotas), p50(samples.off)];
      s.rows.push({
        figure: `session creation p50, r.spareSessions ${spares}${spares === "0" ? " (forked on the call)" : ""}`,
        value: ms(q),
        reference: `${ms(off)} without quotas`,
        ratio: times(q / off),
        target: "≤ 1.2×",
        verdict: verdict(q / off <= 1.2),
      });
      if (spares === "8") {
        const id = async (http: HttpClient) => (JSON.parse((await http.request("POST", "/r/sessions")).body.toString("utf8")) as { id: string }).id;
        const [a, b] = [await id(withQuotas), await id(without)];
        const evalOf = (http: HttpClient, sid: string) => () => http.request("POST", `/r/session/${sid}/_eval`, { headers: { "content-type": "application/x-rscript", accept: "application/json" }, body: "1+1" });
        const e = await sampleInterleaved({ quotas: evalOf(withQuotas, a), off: evalOf(without, b) }, o.quick ? 500 : 3000, 100);
        s.rows.push({ figure: "eval 1+1 over REST p50 (node:http client)", value: ms(e.quotas.p50), reference: `${ms(e.off.p50)} without quotas`, ratio: times(e.quotas.p50 / e.off.p50) });
      }
    } finally {
      for (const server of servers) await server.stop();
    }
  }
  s.notes.push(`${n} sessions created and deleted per server in 10 interleaved rounds (the DELETE not timed), two servers as production runs them, one per r.quotas value; eval: 10 interleaved rounds.`);
  return [s];
}
