/**
 * Data in and out as rockr and Opal move it (issue 30): a data.frame of 2,500,000 rows assigned as
 * base64 of its R serialization (`_assign`, application/x-rdata, curl posting the file), and answered
 * as R serialization (`_eval`, Accept: application/octet-stream, curl writing it to /dev/null),
 * against the floor measured in the same run: Node's own base64 decode of the body plus bare R's
 * `unserialize` of the bytes (in an Rscript), and bare R's `serialize` plus curl's transfer of as many
 * bytes from a bare node:http server on loopback. Then the server's peak RSS
 * while four such assigns of ~250 MB run at once, against its idle RSS.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { onCleanup } from "./cleanup.js";
import { mib, section, times, verdict, type Section } from "./report.js";
import { startServerProcess } from "./server-process.js";

export interface AssignBenchOptions {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const seconds = (x: number): string => `${x.toFixed(2)} s`;

/** Peak RSS (VmHWM) and RSS now of a process, bytes. */
function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1]) * 1024;
  return { rss: kb("VmRSS"), peak: kb("VmHWM") };
}

/** Seconds R takes for `code` in a fresh Rscript (the figure it prints). */
function rSeconds(code: string): number {
  return Number(execFileSync("Rscript", ["--vanilla", "-e", code], { encoding: "utf8" }).trim());
}

export async function runAssignBench(o: AssignBenchOptions): Promise<Section[]> {
  const s = section("Data in and out: a large data.frame assigned as rockr sends it, and answered as R serialization");
  const rows = o.quick ? 500_000 : 2_500_000;
  const rounds = o.quick ? 1 : 3;
  const dir = mkdtempSync(join(tmpdir(), "rock-bench-assign-"));
  onCleanup(async () => rmSync(dir, { recursive: true, force: true }));
  const rds = join(dir, "df.rds");
  const b64 = join(dir, "df.b64");
  o.log(`assign: making a data.frame of ${rows} rows`);
  execFileSync("Rscript", [
    "--vanilla",
    "-e",
    `set.seed(1); n <- ${rows}; df <- data.frame(a = runif(n), b = sample(letters, n, TRUE), c = seq_len(n) + 0.5, d = rnorm(n), e = sample(c(TRUE, FALSE), n, TRUE), stringsAsFactors = TRUE); con <- file("${rds}", "wb"); serialize(df, con); close(con)`,
  ]);
  writeFileSync(b64, readFileSync(rds).toString("base64"));
  const bytes = statSync(rds).size;

  // The floor: Node's decode of the body, bare R's unserialize of the bytes, each as it does it alone.
  const decode: number[] = [];
  const unserialize: number[] = [];
  const serialize: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const text = readFileSync(b64, "latin1");
    const t0 = performance.now();
    Buffer.from(text, "base64");
    decode.push((performance.now() - t0) / 1000);
    unserialize.push(rSeconds(`r <- readBin("${rds}", "raw", file.size("${rds}")); cat(system.time(x <- unserialize(r))[["elapsed"]])`));
    serialize.push(rSeconds(`x <- readRDS("${rds}"); cat(system.time(r <- serialize(x, NULL))[["elapsed"]])`));
  }
  // curl's transfer of as many bytes from a bare node:http server: what any answer of that size costs.
  const payload = readFileSync(rds);
  const bare = http.createServer((_req, res) => res.writeHead(200, { "content-length": payload.length }).end(payload));
  await new Promise<void>((resolve) => bare.listen(0, "127.0.0.1", resolve));
  onCleanup(async () => void bare.close());
  const barePort = (bare.address() as { port: number }).port;
  const transfer: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const r = await execa("curl", ["-sS", "-o", "/dev/null", "-w", "%{time_total}", `http://127.0.0.1:${barePort}/`]);
    transfer.push(Number(r.stdout));
  }
  bare.close();

  const server = await startServerProcess({ rStart: true, env: { ROCK_R_SPARE_SESSIONS: "4" } });
  try {
    const auth = ["-u", "admin:admin"];
    const url = `http://127.0.0.1:${server.port}`;
    const open = async (): Promise<string> => {
      const r = await execa("curl", ["-sS", ...auth, "-X", "POST", `${url}/r/sessions`]);
      return (JSON.parse(r.stdout) as { id: string }).id;
    };
    const assign = async (id: string): Promise<number> => {
      const r = await execa("curl", [
        ...["-sS", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", ...auth],
        ...["-H", "Content-Type: application/x-rdata", "--data-binary", `@${b64}`, `${url}/r/session/${id}/_assign?s=df`],
      ]);
      const [status, total] = r.stdout.split(" ");
      if (status !== "200") throw new Error(`assign answered ${status}`);
      return Number(total);
    };
    const answer = async (id: string): Promise<number> => {
      const r = await execa("curl", [
        ...["-sS", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", ...auth],
        ...["-H", "Content-Type: application/x-rscript", "-H", "Accept: application/octet-stream", "--data-binary", "df"],
        `${url}/r/session/${id}/_eval`,
      ]);
      const [status, total] = r.stdout.split(" ");
      if (status !== "200") throw new Error(`eval answered ${status}`);
      return Number(total);
    };
    const id = await open();
    // The first round after the start warms Node's code and heap and R's allocator (glibc raises its
    // mmap threshold once a large vector is freed): told in a note, not counted in the medians.
    o.log("assign: a first round, not counted");
    const cold = { assigned: await assign(id), answered: await answer(id) };
    const assigned: number[] = [];
    const answered: number[] = [];
    for (let i = 0; i < rounds; i++) {
      o.log(`assign: round ${i + 1} of ${rounds}`);
      assigned.push(await assign(id));
      answered.push(await answer(id));
    }
    const floorIn = median(decode) + median(unserialize);
    const floorOut = median(serialize) + median(transfer);
    s.rows.push({
      figure: `_assign of ${mib(bytes)} (base64 ${mib(statSync(b64).size)}), curl`,
      value: seconds(median(assigned)),
      reference: `${seconds(floorIn)} (decode ${seconds(median(decode))} + unserialize ${seconds(median(unserialize))})`,
      ratio: times(median(assigned) / floorIn),
      target: "≤ 1.3×",
      verdict: verdict(median(assigned) <= 1.3 * floorIn),
    });
    s.rows.push({
      figure: `_eval of it as R serialization, curl`,
      value: seconds(median(answered)),
      reference: `${seconds(floorOut)} (serialize ${seconds(median(serialize))} + transfer ${seconds(median(transfer))})`,
      ratio: times(median(answered) / floorOut),
      target: "≤ 1.3×",
      verdict: verdict(median(answered) <= 1.3 * floorOut),
    });

    // Four at once, each ~250 MB of serialization (the data.frame's base64 sent as often as it takes).
    const idle = memory(server.pid).rss;
    const ids = await Promise.all([open(), open(), open(), open()]);
    const repeats = Math.max(1, Math.round((o.quick ? 60 : 250) / (bytes / 1048576)));
    o.log(`assign: four at once, ${repeats} × each`);
    await Promise.all(
      ids.map(async (sid) => {
        for (let i = 0; i < repeats; i++) await assign(sid);
      }),
    );
    const peak = memory(server.pid).peak;
    s.rows.push({
      figure: `the server's peak RSS, four assigns at once (${mib(bytes * repeats)} each in all)`,
      value: mib(peak),
      reference: `${mib(idle)} idle`,
      ratio: times(peak / idle),
      target: "≤ 2×",
      verdict: verdict(peak <= 2 * idle),
    });
    s.notes.push(
      `The first round after the server's start, not counted: _assign ${seconds(cold.assigned)}, _eval ${seconds(cold.answered)}.`,
      `${rounds} round(s) after it, medians. The floor's parts each alone: Node's Buffer.from(text, "base64") of the body read as latin1, and unserialize(bytes) / serialize(x, NULL) in a fresh Rscript.`,
      "The server in a process of its own (server-process.ts); curl posts the base64 file and writes the answer to /dev/null.",
    );
  } finally {
    await server.stop();
  }
  return [s];
}
