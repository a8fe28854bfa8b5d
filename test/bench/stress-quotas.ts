/**
 * One session against the others, with quotas (a control group per session), private temporary folders
 * and no network, on a server as production runs it: a session past its memory, twenty sessions past the
 * sessions' budget, two sessions spinning in eight children each, what a session leaves in /tmp, a
 * connection out of a session without network. Each row: what the others saw.
 */
import { openCgroupTree } from "../../src/r/confine/cgroups.js";
import { hasCapability, SYS_ADMIN } from "../../src/r/confine/capabilities.js";
import { HttpClient } from "./http-client.js";
import { ms, verdict, type Row } from "./report.js";
import { startServerProcess } from "./server-process.js";

const RSCRIPT = { "content-type": "application/x-rscript", accept: "application/json" };

export async function quotaStressRows(log: (line: string) => void): Promise<Row[]> {
  const probe = process.getuid?.() === 0 ? openCgroupTree(`rock-stress-probe-${process.pid}`, 0) : { unavailable: "not root" };
  if ("unavailable" in probe) return [{ figure: `skipped: no quotas here (${probe.unavailable})`, value: "" }];
  probe.close();
  const rows: Row[] = [];
  const server = await startServerProcess({
    rStart: true,
    env: {
      ROCK_R_SESSION_MEMORY_MB: "250",
      ROCK_R_SESSIONS_MEMORY_MB: "1500",
      ROCK_R_SPARE_SESSIONS: "0",
      ROCK_R_MAX_SESSIONS_PER_USER: "0",
      ROCK_LOG_LEVEL: "error",
      ...(hasCapability(SYS_ADMIN) ? { ROCK_R_SESSION_NETWORK: "none" } : {}),
    },
  });
  const http = new HttpClient(server.port, "admin", 32);
  try {
    const open = async () => (JSON.parse((await http.ok("POST", "/r/sessions", {}, 201)).body.toString("utf8")) as { id: string }).id;
    const evaluate = (id: string, code: string) => http.request("POST", `/r/session/${id}/_eval`, { headers: RSCRIPT, body: code });
    const latencies = async (id: string, n: number): Promise<number[]> => {
      const times: number[] = [];
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        await evaluate(id, "1+1");
        times.push(performance.now() - t);
      }
      return times.sort((a, b) => a - b);
    };
    const p = (xs: number[], q: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * q))]!;

    log("stress quotas: a session past its memory");
    const [greedy, neighbour] = [await open(), await open()];
    const during = latencies(neighbour, 200);
    const t = performance.now();
    const ended = await evaluate(greedy, "x <- numeric(60e6); 1");
    const endMs = performance.now() - t;
    const seen = await during;
    const message = (JSON.parse(ended.body.toString("utf8")) as { message?: string }).message ?? "";
    rows.push({
      figure: "a session allocating 480 MB past its 250 MiB: ended alone, the answer",
      value: `${ended.status} "${message}" in ${ms(endMs)}`,
      target: "429, the message",
      verdict: verdict(ended.status === 429 && message === "R session ended: memory limit of 250 MiB reached"),
    });
    rows.push({
      figure: "… its neighbour's 1+1 meanwhile, p50 / p95",
      value: `${ms(p(seen, 0.5))} / ${ms(p(seen, 0.95))}`,
      target: "answers",
      verdict: verdict(seen.length === 200),
    });
    await http.request("DELETE", "/r/sessions");

    log("stress quotas: 20 sessions against the budget");
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await open());
    const t20 = performance.now();
    const answers = await Promise.all(ids.map((id) => evaluate(id, "x <- numeric(17.5e6); Sys.sleep(2); length(x)")));
    const endedByBudget = answers.filter((a) => a.status === 429).length;
    const check = await http.request("GET", "/_check");
    rows.push({
      figure: "20 sessions each taking 80% of 250 MiB against a 1,500 MiB budget: sessions ended / the server",
      value: `${endedByBudget} ended, ${20 - endedByBudget} served in ${ms(performance.now() - t20)}; /_check ${check.status}`,
      target: "sessions ended, never the server",
      verdict: verdict(endedByBudget > 0 && check.status === 200),
    });
    await http.request("DELETE", "/r/sessions");

    log("stress quotas: two sessions spinning in 8 children each");
    const busy = [await open(), await open()];
    for (const id of busy) await evaluate(id, "for (i in 1:8) parallel::mcparallel(repeat {}); TRUE");
    const third = await open();
    const spun = await latencies(third, 200);
    rows.push({
      figure: "a third session's 1+1 beside 2 × 8 spinning processes, p50 / p95",
      value: `${ms(p(spun, 0.5))} / ${ms(p(spun, 0.95))}`,
      target: "p95 < 50 ms",
      verdict: verdict(p(spun, 0.95) < 50),
    });
    await http.request("DELETE", "/r/sessions");

    if (hasCapability(SYS_ADMIN)) {
      log("stress quotas: /tmp and the network");
      const first = await open();
      await evaluate(first, "writeLines('left', '/tmp/left-behind'); TRUE");
      await http.request("DELETE", `/r/session/${first}`);
      const next = await open();
      const leftSeen = (await evaluate(next, "file.exists('/tmp/left-behind')")).body.toString("utf8");
      rows.push({
        figure: "a file the previous session left in /tmp, seen by the next",
        value: leftSeen,
        target: "false",
        verdict: verdict(leftSeen === "false"),
      });
      const out = (
        await evaluate(
          next,
          `tryCatch({ readLines(url('http://127.0.0.1:${server.port}/_info'), warn = FALSE); 'reached' }, error = function(e) 'refused')`,
        )
      ).body.toString("utf8");
      rows.push({
        figure: "r.sessionNetwork none: the service's own port on the host's loopback, from R",
        value: out,
        target: '"refused"',
        verdict: verdict(out === '"refused"'),
      });
    }
  } finally {
    http.agent.destroy();
    await server.stop();
  }
  return rows;
}
