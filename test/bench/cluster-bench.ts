/**
 * Several nodes behind HAProxy (deploy/haproxy.cfg, unchanged), on this one machine: sessions created
 * per second and `1+1` REST evaluations per second through HAProxy with 1, 2 and 3 nodes, beside the
 * same evaluations sent to one node directly (what the balancer costs), and what a node costs beside the
 * R it runs (memory of its Node process and of its R server). With two cores, more nodes do not mean
 * more throughput: the point is the overhead, not linear scaling. Load from h2load (C), four clients.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { basic } from "../support/server.js";
import { onCleanup } from "./cleanup.js";
import { ensureDebian, hasCommand } from "./debian.js";
import { ensureH2load, runH2load } from "./h2load.js";
import { mib, perSecond, section, times, type Section } from "./report.js";
import { freePort } from "./rserve-client.js";
import { ROOT, startServerProcess, vmRss, type ServerProcess } from "./server-process.js";
import { processes } from "../support/procfs.js";

const NODES = ["node1", "node2", "node3"] as const;
const AUTH = basic("admin", "admin");

export interface ClusterBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

interface Figures {
  readonly sessionsPerSecond: number;
  readonly evalsPerSecond: number;
}

export async function runClusterBench(o: ClusterBenchOptions): Promise<Section[]> {
  const s = section("Several nodes behind HAProxy (deploy/haproxy.cfg), h2load, 4 clients");
  const missing = await missingTools();
  if (missing) {
    s.notes.push(`skipped: ${missing}`);
    return [s];
  }
  const dir = await mkdtemp(join(tmpdir(), "rock-bench-cluster-"));
  const removeDir = onCleanup(() => rm(dir, { recursive: true, force: true }));
  const script = join(dir, "script.R");
  await writeFile(script, "1+1");
  // h2load cannot send an empty file: a session is asked for with `{}`, as JSON clients do.
  const empty = join(dir, "empty.json");
  await writeFile(empty, "{}");
  const sessions = o.quick ? 24 : 60;
  const evals = o.quick ? 2000 : 8000;
  try {
    let direct: number | undefined;
    for (const count of [1, 2, 3]) {
      o.log(`cluster: ${count} node(s)`);
      const cluster = await startCluster(count);
      try {
        const f = await measure(cluster.lb, { script, empty, sessions, evals });
        if (count === 1) {
          direct = await evalRate(
            `http://127.0.0.1:${cluster.nodes[0]!.port}`,
            await openSessions(`http://127.0.0.1:${cluster.nodes[0]!.port}`, 4),
            script,
            evals,
          );
          s.rows.push({ figure: "1+1 evals/s, one node directly (no balancer)", value: perSecond(direct) });
          const node = cluster.nodes[0]!;
          const r = rServerRss(node.pid);
          s.rows.push({
            figure: "a node beside its R: Node process RSS / R server RSS (after the run)",
            value: `${mib(node.rss())} / ${mib(r)}`,
          });
        }
        s.rows.push({ figure: `sessions created/s through HAProxy, ${count} node(s)`, value: perSecond(f.sessionsPerSecond) });
        s.rows.push({
          figure: `1+1 evals/s through HAProxy, ${count} node(s)`,
          value: perSecond(f.evalsPerSecond),
          ...(direct ? { reference: perSecond(direct), ratio: times(f.evalsPerSecond / direct) } : {}),
        });
      } finally {
        await cluster.stop();
      }
    }
    s.notes.push(
      `${sessions} sessions created (POST /r/sessions, spare sessions on) then ${evals} evaluations of 1+1 over REST/h2c spread over 4 sessions, h2load -c4 -m1 through HAProxy (leastconn for new sessions, the session's node by its id prefix for its calls); reference: the same evaluations sent to a node directly. Nodes run as plain processes on this machine (disjoint session uids); Opal registration is off the request path and costs no call anything.`,
    );
  } finally {
    await removeDir();
  }
  return [s];
}

interface Cluster {
  readonly lb: string;
  readonly nodes: ServerProcess[];
  stop(): Promise<void>;
}

/** `count` nodes named node1… with deploy/cluster.env's settings, and HAProxy with deploy/haproxy.cfg (absent nodes at a closed port). */
async function startCluster(count: number): Promise<Cluster> {
  const ports = await Promise.all(NODES.map(() => freePort()));
  const closed = await freePort();
  const addr = (i: number) => `127.0.0.1:${i < count ? ports[i] : closed}`;
  const peers = NODES.slice(0, count)
    .map((id, i) => `${id}=http://${addr(i)}`)
    .join(",");
  const nodes: ServerProcess[] = [];
  let haproxy: ChildProcess | undefined;
  const stop = onCleanup(async () => {
    if (haproxy && haproxy.exitCode === null) {
      haproxy.kill("SIGKILL");
      await once(haproxy, "exit");
    }
    await Promise.all(nodes.map((n) => n.stop()));
  });
  try {
    for (let i = 0; i < count; i++) {
      nodes.push(
        await startServerProcess({
          rStart: true,
          port: ports[i]!,
          env: {
            ROCK_ID: NODES[i]!,
            ROCK_PEERS: peers,
            ROCK_CATALOG_NODE: "node1",
            ROCK_R_MAX_SESSIONS: "0",
            ROCK_R_MAX_SESSIONS_PER_USER: "0",
            ROCK_LOG_LEVEL: "warn",
          },
        }),
      );
    }
    const lbPort = await freePort();
    haproxy = spawn("haproxy", ["-f", join(ROOT, "deploy/haproxy.cfg"), "-db"], {
      env: {
        ...process.env,
        ROCK_LB_BIND: `127.0.0.1:${lbPort}`,
        ROCK_NODE1_ADDR: addr(0),
        ROCK_NODE2_ADDR: addr(1),
        ROCK_NODE3_ADDR: addr(2),
      },
      stdio: "ignore",
    });
    const lb = `http://127.0.0.1:${lbPort}`;
    // Up once HAProxy's checks passed twice for every node (2 s apart).
    const end = Date.now() + 20_000;
    while (
      (await fetch(`${lb}/_check`).then(
        (r) => r.status,
        () => 0,
      )) !== 200 &&
      Date.now() < end
    )
      await new Promise((r) => setTimeout(r, 200));
    await new Promise((r) => setTimeout(r, 4500));
    return { lb, nodes, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

async function measure(lb: string, o: { script: string; empty: string; sessions: number; evals: number }): Promise<Figures> {
  const created = await h2load(`${lb}/r/sessions`, o.sessions, o.empty, { "content-type": "application/json" });
  await fetch(`${lb}/r/sessions`, { method: "DELETE", headers: { authorization: AUTH } });
  const ids = await openSessions(lb, 4);
  return { sessionsPerSecond: created, evalsPerSecond: await evalRate(lb, ids, o.script, o.evals) };
}

async function evalRate(base: string, ids: readonly string[], script: string, n: number): Promise<number> {
  const headers = { "content-type": "application/x-rscript", accept: "application/json" };
  const urls = ids.map((id) => `${base}/r/session/${id}/_eval`);
  await h2load(urls, Math.min(400, n), script, headers); // warm-up
  return h2load(urls, n, script, headers);
}

async function openSessions(base: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${base}/r/sessions`, { method: "POST", headers: { authorization: AUTH } });
    if (res.status !== 201) throw new Error(`POST /r/sessions answered ${res.status}: ${await res.text()}`);
    ids.push(((await res.json()) as { id: string }).id);
  }
  return ids;
}

/** h2load over h2c, 4 clients, one call in flight each; requests/s. */
async function h2load(urls: string | readonly string[], n: number, file: string, headers: Record<string, string>): Promise<number> {
  const args = ["-c", "4", "-d", file, "-H", `authorization: ${AUTH}`];
  for (const [k, v] of Object.entries(headers)) args.push("-H", `${k}: ${v}`);
  args.push(...(typeof urls === "string" ? [urls] : urls));
  return n / (await runH2load(args, n)).seconds;
}

/** RSS of the R server the node started (the leader of its own process group, a child of the node). */
function rServerRss(nodePid: number): number {
  const leader = processes().find((p) => p.ppid === nodePid && p.pgrp === p.pid);
  return leader ? vmRss(leader.pid) : 0;
}

/** HAProxy and h2load, installed from Debian when missing and this process may; else why not. */
async function missingTools(): Promise<string | undefined> {
  return (await ensureDebian("HAProxy", ["haproxy"], () => hasCommand("haproxy"))) ?? (await ensureH2load());
}
