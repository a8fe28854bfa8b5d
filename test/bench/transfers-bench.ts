/**
 * File transfers as people make them: curl on loopback against this server's REST download and
 * upload, against nginx (Debian nginx-light: sendfile for the download, WebDAV PUT for the upload) and
 * against a bare node:http server (file-floor-server.ts) with the same curl, in interleaved rounds.
 * Beside the rates: each server's CPU per GiB and this server's peak RSS during its transfers.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, readFileSync } from "node:fs";
import { link, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import { cpuSeconds } from "../../src/r/confine/processes.js";
import { processes } from "../support/procfs.js";
import { onCleanup } from "./cleanup.js";
import { ensureDebian, hasCommand } from "./debian.js";
import { HttpClient } from "./http-client.js";
import { startFileFloor } from "./floor-processes.js";
import { mbps, mib, section, times, verdict, type Section } from "./report.js";
import { freePort } from "./rserve-client.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";
import { PeakSampler, summarize } from "./stats.js";

const run = promisify(execFile);
const USER = "admin";

export interface TransfersBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

type Peer = "rock" | "nginx" | "node";
/** One curl transfer: what it sends or fetches, and the processes whose CPU it costs. */
interface Transfer {
  readonly peer: Peer;
  readonly args: string[];
  /** Checks the answer's body (uploads). */
  readonly check?: (body: string) => void;
  /** Run after the transfer, untimed: each upload writes a new file, as cp does. */
  readonly after: () => Promise<unknown>;
}

interface Measured {
  readonly mbps: number;
  readonly cpuSeconds: number;
  readonly rssGrowth: number;
  /** The machine's CPU time taken by the hypervisor (steal) during the transfer, a share of all its CPU time. */
  readonly steal: number;
}

/** The machine's CPU time so far, all of it and the hypervisor's share (steal), in jiffies (/proc/stat). */
function machineCpu(): { readonly total: number; readonly steal: number } {
  const fields = readFileSync("/proc/stat", "latin1").split("\n", 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
  return { total: fields.reduce((a, b) => a + b, 0), steal: fields[7] ?? 0 };
}

export async function runTransfersBench(o: TransfersBenchOptions): Promise<Section[]> {
  const bytes = (o.quick ? 100 : 1024) * 1024 * 1024;
  const rounds = 3;
  const s = section(`File transfers with curl: ${mib(bytes)} over loopback, this server vs nginx-light vs a bare node:http server`);
  const missing =
    (await ensureDebian("curl", ["curl"], () => hasCommand("curl"))) ??
    (await ensureDebian("nginx", ["nginx-light"], () => hasCommand("nginx")));
  if (missing) {
    s.notes.push(`skipped: ${missing}`);
    return [s];
  }
  const dir = await mkdtemp(join(tmpdir(), "rock-bench-transfers-"));
  const removeDir = onCleanup(() => rm(dir, { recursive: true, force: true }));
  let server: ServerProcess | undefined;
  let nginx: Nginx | undefined;
  let floor: Awaited<ReturnType<typeof startFileFloor>> | undefined;
  let http: HttpClient | undefined;
  try {
    o.log(`transfers: a ${mib(bytes)} file, this server, nginx and the bare node:http server…`);
    const src = join(dir, "big.bin");
    const block = randomBytes(1024 * 1024);
    await pipeline(
      Readable.from(
        (function* () {
          for (let n = 0; n < bytes; n += block.length) yield block;
        })(),
      ),
      createWriteStream(src),
    );
    const www = join(dir, "www");
    await mkdir(join(www, "dav"), { recursive: true });
    // The same file (a hard link): nginx and the bare server read the very pages the uploads read.
    await link(src, join(www, "big.bin"));
    server = await startServerProcess({ rStart: true });
    nginx = await startNginx(dir, www);
    floor = await startFileFloor(dir);
    http = new HttpClient(server.port, USER);
    const id = (JSON.parse((await http.ok("POST", "/r/sessions", {}, 201)).body.toString("utf8")) as { id: string }).id;
    const rock = `http://127.0.0.1:${server.port}/r/session/${id}`;
    const auth = ["-u", `${USER}:${USER}`];
    const unlink = (name: string) =>
      http!.ok("POST", `/r/session/${id}/_eval`, {
        headers: { "content-type": "application/x-rscript", accept: "application/json" },
        body: `unlink("${name}"); NULL`,
      });
    const stored = (body: string) => {
      const size = Number((JSON.parse(body) as { size: number | string }).size);
      if (size !== bytes) throw new Error(`upload stored ${size} bytes, expected ${bytes}`);
    };
    // The file this server sends, uploaded once.
    await curl(["-F", `file=@${src}`, ...auth, `${rock}/_upload?path=big.bin`], bytes, "upload");
    await run("sync");

    const dst = join(dir, "download.bin");
    const removeDst = () => rm(dst, { force: true });
    const floorUpload = () => rm(join(dir, "floor-upload.bin"), { force: true });
    const downloads: Transfer[] = [
      { peer: "rock", args: ["-o", dst, ...auth, `${rock}/_download?path=big.bin`], after: removeDst },
      { peer: "nginx", args: ["-o", dst, `${nginx.url}/big.bin`], after: removeDst },
      { peer: "node", args: ["-o", dst, `${floor.url}/?path=big.bin`], after: removeDst },
    ];
    // The same downloads thrown away: the servers' side without the client's write of a file.
    const discard = (t: Transfer): Transfer => ({ ...t, args: ["-o", "/dev/null", ...t.args.slice(2)], after: async () => undefined });
    const multipart: Transfer[] = [
      { peer: "rock", args: ["-F", `file=@${src}`, ...auth, `${rock}/_upload?path=up.bin`], check: stored, after: () => unlink("up.bin") },
      { peer: "nginx", args: ["-T", src, `${nginx.url}/dav/up.bin`], after: () => rm(join(www, "dav", "up.bin"), { force: true }) },
      { peer: "node", args: ["-F", `file=@${src}`, `${floor.url}/`], after: floorUpload },
    ];
    const raw: Transfer[] = [
      {
        peer: "rock",
        args: ["-T", src, "-X", "POST", "-H", "content-type: application/octet-stream", ...auth, `${rock}/_upload?path=up.bin`],
        check: stored,
        after: () => unlink("up.bin"),
      },
      { peer: "node", args: ["-T", src, `${floor.url}/`], after: floorUpload },
    ];
    const pids: Record<Peer, () => number[]> = { rock: () => [server!.pid], nginx: () => nginx!.pids(), node: () => [floor!.pid] };
    const rss = () => server!.rss();
    const baseline = rss();
    const measure = async (t: Transfer, what: "download" | "upload"): Promise<Measured> => {
      const before = await cpu(pids[t.peer]());
      const machineBefore = machineCpu();
      const rssBefore = t.peer === "rock" ? rss() : 0;
      const sampler = t.peer === "rock" ? new PeakSampler(rss, 50) : undefined;
      const seconds = await curl(t.args, bytes, what, t.check);
      const peak = sampler?.stop() ?? 0;
      const cpuUsed = (await cpu(pids[t.peer]())) - before;
      const machineAfter = machineCpu();
      const steal = (machineAfter.steal - machineBefore.steal) / Math.max(1, machineAfter.total - machineBefore.total);
      await t.after();
      return { mbps: bytes / 1e6 / seconds, cpuSeconds: cpuUsed, rssGrowth: peak - rssBefore, steal };
    };
    // No warm-up round: a transfer lasts a second or more, what a first call costs (loading code,
    // nginx's first request) is milliseconds; and the upload above already ran this server's path once.

    const discarded = downloads.map(discard);
    const got = {
      down: new Map<Peer, Measured[]>(),
      discarded: new Map<Peer, Measured[]>(),
      multipart: new Map<Peer, Measured[]>(),
      raw: new Map<Peer, Measured[]>(),
    };
    for (let r = 0; r < rounds; r++) {
      o.log(`transfers: round ${r + 1} of ${rounds}…`);
      // Each peer goes first in one round of three: a slow minute of this shared VM is spread alike.
      const turn = <T>(xs: T[]) => xs.map((_, i) => xs[(i + r) % xs.length]!);
      for (const [kind, list, what] of [
        ["down", downloads, "download"],
        ["discarded", discarded, "download"],
        ["multipart", multipart, "upload"],
        ["raw", raw, "upload"],
      ] as const) {
        for (const t of turn([...list])) {
          const m = await measure(t, what);
          const xs = got[kind].get(t.peer) ?? [];
          xs.push(m);
          got[kind].set(t.peer, xs);
        }
      }
    }

    const med = (kind: keyof typeof got, peer: Peer, f: (m: Measured) => number) => summarize((got[kind].get(peer) ?? []).map(f)).p50;
    const rate = (kind: keyof typeof got, peer: Peer) => med(kind, peer, (m) => m.mbps);
    const perGiB = (kind: keyof typeof got, peer: Peer) => `${med(kind, peer, (m) => (m.cpuSeconds * 2 ** 30) / bytes).toFixed(2)} s`;
    const largest = (kind: keyof typeof got) => Math.max(...(got[kind].get("rock") ?? []).map((m) => m.rssGrowth));
    const target = (ours: number, ref: number) => ({
      ratio: times(ours / ref),
      target: "≥ 0.8× nginx",
      verdict: verdict(ours >= 0.8 * ref),
    });
    const bare = (kind: keyof typeof got, ref: number) => `bare node:http ${mbps(rate(kind, "node"))} (${times(rate(kind, "node") / ref)})`;
    const down = { rock: rate("down", "rock"), nginx: rate("down", "nginx") };
    const put = rate("multipart", "nginx");
    const limit = 64 * 1024 * 1024;
    const [downGrowth, upGrowth] = [Math.max(largest("down"), largest("discarded")), Math.max(largest("multipart"), largest("raw"))];
    s.rows.push(
      {
        figure: "download (curl -o file)",
        value: mbps(down.rock),
        reference: `nginx sendfile ${mbps(down.nginx)}; ${bare("down", down.nginx)}`,
        ...target(down.rock, down.nginx),
      },
      {
        figure: "download (curl -o /dev/null)",
        value: mbps(rate("discarded", "rock")),
        reference: `nginx sendfile ${mbps(rate("discarded", "nginx"))}; ${bare("discarded", rate("discarded", "nginx"))}`,
        ...target(rate("discarded", "rock"), rate("discarded", "nginx")),
      },
      {
        figure: "upload, multipart (curl -F)",
        value: mbps(rate("multipart", "rock")),
        reference: `nginx WebDAV PUT ${mbps(put)}; ${bare("multipart", put)}`,
        ...target(rate("multipart", "rock"), put),
      },
      {
        figure: "upload, raw body (curl -T, POST)",
        value: mbps(rate("raw", "rock")),
        reference: `nginx WebDAV PUT ${mbps(put)}; ${bare("raw", put)}`,
        ...target(rate("raw", "rock"), put),
      },
      {
        figure: "server CPU per GiB, download",
        value: perGiB("down", "rock"),
        reference: `nginx ${perGiB("down", "nginx")}; bare node:http ${perGiB("down", "node")}`,
      },
      {
        figure: "server CPU per GiB, upload multipart / raw",
        value: `${perGiB("multipart", "rock")} / ${perGiB("raw", "rock")}`,
        reference: `nginx PUT ${perGiB("multipart", "nginx")}; bare node:http ${perGiB("multipart", "node")} / ${perGiB("raw", "node")}`,
      },
      { figure: "server RSS before the transfers", value: mib(baseline) },
      {
        figure: "server RSS growth, download (largest)",
        value: `+${mib(downGrowth)}`,
        target: `< ${mib(limit)}`,
        verdict: verdict(downGrowth < limit),
      },
      {
        figure: "server RSS growth, upload (largest)",
        value: `+${mib(upGrowth)}`,
        target: `< ${mib(limit)}`,
        verdict: verdict(upGrowth < limit),
      },
    );
    s.notes.push(
      `Medians of ${rounds} rounds; each round runs the downloads (to a file, then to /dev/null), the multipart uploads and the raw uploads, each peer first in turn. MB = 10^6 bytes; rate = size / curl's time_total; the source file is in the page cache; a download is written to a file (removed after), every upload to a new file (removed after).`,
    );
    // What moves the rates from run to run (issue 30 asks for its cause): each round's rates side by
    // side, and how much of the machine the hypervisor took meanwhile.
    const peers: Peer[] = ["rock", "nginx", "node"];
    for (const kind of ["down", "discarded", "multipart", "raw"] as const) {
      const byRound = Array.from({ length: rounds }, (_, r) =>
        peers.map((peer) => (got[kind].get(peer)?.[r] ? mbps(got[kind].get(peer)![r]!.mbps) : "-")).join(" / "),
      );
      s.notes.push(`${kind} by round, this server / nginx / bare node:http: ${byRound.join("; ")}`);
    }
    const steals = Object.values(got).flatMap((m) => [...m.values()].flat().map((x) => x.steal));
    s.notes.push(
      `CPU steal (time the hypervisor took from this VM's vCPUs) during the transfers: median ${(summarize(steals).p50 * 100).toFixed(1)}%, largest ${(Math.max(...steals) * 100).toFixed(1)}%.`,
    );
    s.notes.push(
      "nginx: Debian's nginx-light, worker_processes auto, sendfile on, tcp_nopush on, WebDAV PUT into a folder on the same file system (the body goes to a temporary file, then is renamed). bare node:http = test/bench/file-floor-server.ts: busboy to a file for multipart, the body piped to a file for PUT, 1 MiB reads to the socket, no auth, checks, staging or uid.",
    );
    s.notes.push(
      "CPU = utime + stime from /proc of the server process (nginx: master and workers) over one transfer, median over the rounds; RSS = VmRSS of this server's process every 50 ms, R sessions not included; growth = peak during a transfer - just before it.",
    );
  } finally {
    http?.close();
    await floor?.stop();
    await nginx?.stop();
    await server?.stop();
    await removeDir();
  }
  return [s];
}

/** Runs curl; curl's own time_total of the transfer (s). Fails on anything but a 2xx of the full size. */
async function curl(args: string[], bytes: number, what: "download" | "upload", check?: (body: string) => void): Promise<number> {
  const { stdout } = await run("curl", ["-sS", "-w", "\n%{http_code} %{time_total} %{size_download} %{size_upload}", ...args], {
    maxBuffer: 1 << 20,
    timeout: 10 * 60_000,
  });
  const nl = stdout.lastIndexOf("\n");
  const [code, total, down, up] = stdout
    .slice(nl + 1)
    .split(" ")
    .map(Number) as [number, number, number, number];
  const body = stdout.slice(0, nl);
  if (code < 200 || code > 299) throw new Error(`curl ${args.at(-1)} answered ${code}: ${body.slice(0, 300)}`);
  const moved = what === "download" ? down : up;
  // A multipart body is the file plus its part headers.
  if (moved < bytes || (what === "download" && moved !== bytes))
    throw new Error(`curl ${args.at(-1)}: ${moved} bytes moved, expected ${bytes}`);
  check?.(body);
  return total;
}

async function cpu(pids: number[]): Promise<number> {
  let total = 0;
  for (const pid of pids) total += (await cpuSeconds(pid)) ?? 0;
  return total;
}

interface Nginx {
  readonly url: string;
  /** The master and its workers. */
  pids(): number[];
  stop(): Promise<void>;
}

const liveGroups = new Set<number>();
process.on("exit", () => {
  for (const g of liveGroups) {
    try {
      process.kill(-g, "SIGKILL");
    } catch {
      // gone
    }
  }
});

/** nginx in the foreground, its own process group, serving `www` (GET) and `www/dav/` (PUT). */
async function startNginx(dir: string, www: string): Promise<Nginx> {
  const port = await freePort();
  const conf = join(dir, "nginx.conf");
  const temp = (name: string) => join(dir, `nginx-${name}`);
  // user root: the workers read and write the bench's own 0700 folder, as the other servers do.
  await writeFile(
    conf,
    `daemon off;
user root;
worker_processes auto;
pid ${temp("pid")};
error_log ${temp("error.log")} warn;
events { worker_connections 64; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  client_body_temp_path ${temp("body")};
  proxy_temp_path ${temp("proxy")};
  fastcgi_temp_path ${temp("fastcgi")};
  uwsgi_temp_path ${temp("uwsgi")};
  scgi_temp_path ${temp("scgi")};
  server {
    listen 127.0.0.1:${port};
    root ${www};
    location /dav/ {
      dav_methods PUT DELETE;
      create_full_put_path on;
      client_max_body_size 0;
    }
  }
}
`,
  );
  const child: ChildProcess = spawn("nginx", ["-e", temp("error.log"), "-p", dir, "-c", conf], {
    detached: true,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (t: string) => (log = (log + t).slice(-2000)));
  const pid = child.pid;
  if (pid === undefined) throw new Error("could not spawn nginx");
  liveGroups.add(pid);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = onCleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      // TERM: nginx's fast shutdown (workers end at once); KILL to the group if it hangs.
      child.kill("SIGTERM");
      const timer = setTimeout(() => process.kill(-pid, "SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // the group is empty
    }
    liveGroups.delete(pid);
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`nginx exited (${child.exitCode}): ${log}`);
    }
    try {
      await run("curl", ["-sS", "-o", "/dev/null", "--max-time", "2", `${url}/`]);
      break;
    } catch {
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`nginx did not answer on ${url}: ${log}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    url,
    pids: () => [
      pid,
      ...processes()
        .filter((p) => p.ppid === pid)
        .map((p) => p.pid),
    ],
    stop,
  };
}
