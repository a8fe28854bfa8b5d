import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import { NetworkService } from "../../gen/es/rock/networks/v1/networks_pb.js";
import { RService } from "../../gen/es/rock/r/v1/rservice_pb.js";
import type { RegistrationOutcome } from "../cluster/opal-registration.js";
import type { EngineEvent } from "../r/engine/engine.js";
import type { CallRecord } from "../interceptors/call-observer.js";

export interface MetricsSources {
  /** R sessions now: open, busy evaluating, and suspended (saved to disk, no process). */
  readonly sessions: () => { readonly total: number; readonly busy: number; readonly suspended: number };
  /** With quotas: what all sessions' control groups account, memory now and CPU so far. */
  readonly sessionsUsage?: () => { readonly memoryBytes: number; readonly cpuSeconds: number };
  /** The network R sessions have: `restricted`, `host` or `none`. */
  readonly sessionNetwork?: string;
}

/** RPCs that evaluate R code, and those that operate on packages (RService method names). */
const EVALUATIONS = new Set(["Eval", "EvalStream", "Execute"]);
const PACKAGE_OPERATIONS = new Set([
  "ListPackages",
  "UpdatePackages",
  "RemovePackages",
  "InstallPackage",
  "InstallPackageStream",
  "GetPackage",
  "RemovePackage",
  "GetPackageSettings",
]);
/** Catalogue RPCs that only read; every other one writes. */
const CATALOG_QUERY = /^(Get|List|Diff)/;
/** From 1 ms (an empty eval) to a minute (a package install streams longer, and lands in +Inf). */
const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * The service's Prometheus metrics, in a registry of its own (two services in one process, as in
 * tests, do not share counters). Labels are bounded sets: service, method, protocol, code, direction —
 * never a session id, a path or a user (a request that reached no RPC is service and method
 * `unrouted`).
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  private readonly calls = new Counter({
    name: "rock_rpc_requests_total",
    help: "Calls by RPC, protocol and outcome",
    labelNames: ["service", "method", "protocol", "code"],
    registers: [this.registry],
  });
  private readonly latency = new Histogram({
    name: "rock_rpc_duration_seconds",
    help: "Call duration by RPC and protocol (streams: to their end)",
    labelNames: ["service", "method", "protocol"],
    buckets: SECONDS,
    registers: [this.registry],
  });
  private readonly evaluations = new Counter({
    name: "rock_r_evaluations_total",
    help: "R evaluations (Eval, EvalStream, Execute) by outcome",
    labelNames: ["code"],
    registers: [this.registry],
  });
  private readonly evaluationTime = new Histogram({
    name: "rock_r_evaluation_duration_seconds",
    help: "R evaluation duration, as the caller waited for it",
    buckets: SECONDS,
    registers: [this.registry],
  });
  private readonly packages = new Counter({
    name: "rock_r_package_operations_total",
    help: "Package operations by RPC and outcome",
    labelNames: ["method", "code"],
    registers: [this.registry],
  });
  private readonly catalog = new Counter({
    name: "rock_catalog_operations_total",
    help: "Catalogue calls by kind (query, write) and outcome",
    labelNames: ["kind", "code"],
    registers: [this.registry],
  });
  private readonly bytes = new Counter({
    name: "rock_rpc_bytes_total",
    help: "Bytes by RPC and protocol: direction=in, the request bodies declared by Content-Length (REST uploads included); direction=out, the response bodies written (downloads included)",
    labelNames: ["service", "method", "protocol", "direction"],
    registers: [this.registry],
  });
  private readonly serverStarts = new Counter({
    name: "rock_r_server_starts_total",
    help: "R server starts; restart=true after a crash",
    labelNames: ["restart"],
    registers: [this.registry],
  });
  private readonly serverCrashes = new Counter({
    name: "rock_r_server_crashes_total",
    help: "R server exits nobody asked for",
    registers: [this.registry],
  });
  private readonly sessionsOpened = new Counter({
    name: "rock_r_sessions_opened_total",
    help: "R sessions opened",
    registers: [this.registry],
  });
  private readonly sessionsReaped = new Counter({
    name: "rock_r_sessions_reaped_total",
    help: "R sessions closed for being idle",
    registers: [this.registry],
  });
  private readonly sessionsOutOfMemory = new Counter({
    name: "rock_r_sessions_out_of_memory_total",
    help: "R sessions the kernel ended for their memory limit or the sessions' memory budget",
    registers: [this.registry],
  });
  private readonly sessionsSuspended = new Counter({
    name: "rock_r_sessions_suspended_total",
    help: "R sessions suspended (their state saved, their process ended), by why: idle, asked, stop",
    labelNames: ["why"],
    registers: [this.registry],
  });
  private readonly sessionsResumed = new Counter({
    name: "rock_r_sessions_resumed_total",
    help: "R sessions resumed from their saved state",
    registers: [this.registry],
  });
  private readonly sessionSaveSeconds = new Histogram({
    name: "rock_r_session_save_seconds",
    help: "Time to save an R session's state (a checkpoint, or a suspend with its process's end)",
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  private readonly registrations = new Counter({
    name: "rock_opal_registrations_total",
    help: "Attempts to register with Opal (and to unregister at the stop) by outcome: registered, refused, unreachable, unregistered, unregister-failed",
    labelNames: ["outcome"],
    registers: [this.registry],
  });

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    new Gauge({
      name: "rock_r_sessions_open",
      help: "R sessions open",
      registers,
      collect() {
        this.set(sources.sessions().total);
      },
    });
    new Gauge({
      name: "rock_r_sessions_suspended",
      help: "R sessions suspended: their state on disk, no process",
      registers,
      collect() {
        this.set(sources.sessions().suspended);
      },
    });
    new Gauge({
      name: "rock_r_sessions_busy",
      help: "R sessions evaluating",
      registers,
      collect() {
        this.set(sources.sessions().busy);
      },
    });
    const network = sources.sessionNetwork;
    if (network) {
      new Gauge({
        name: "rock_r_session_network",
        help: "The network R sessions have: 1 for the policy of the label (restricted, host or none)",
        labelNames: ["policy"],
        registers,
      }).set({ policy: network }, 1);
    }
    const usage = sources.sessionsUsage;
    if (usage) {
      new Gauge({
        name: "rock_r_sessions_memory_bytes",
        help: "Memory all R sessions use now (their control groups, with quotas)",
        registers,
        collect() {
          this.set(usage().memoryBytes);
        },
      });
      new Gauge({
        name: "rock_r_sessions_cpu_seconds",
        help: "CPU time all R sessions used since the start (their control groups, with quotas)",
        registers,
        collect() {
          this.set(usage().cpuSeconds);
        },
      });
    }
    collectDefaultMetrics({ register: this.registry });
  }

  readonly recordCall = (r: CallRecord): void => {
    const seconds = r.durationMs / 1000;
    this.calls.inc({ service: r.service, method: r.method, protocol: r.protocol, code: r.code });
    this.latency.observe({ service: r.service, method: r.method, protocol: r.protocol }, seconds);
    if (r.bytesIn !== undefined && r.bytesIn > 0)
      this.bytes.inc({ service: r.service, method: r.method, protocol: r.protocol, direction: "in" }, r.bytesIn);
    if (r.bytesOut !== undefined && r.bytesOut > 0)
      this.bytes.inc({ service: r.service, method: r.method, protocol: r.protocol, direction: "out" }, r.bytesOut);
    if (r.service === RService.typeName) {
      if (EVALUATIONS.has(r.method)) {
        this.evaluations.inc({ code: r.code });
        this.evaluationTime.observe(seconds);
      } else if (PACKAGE_OPERATIONS.has(r.method)) this.packages.inc({ method: r.method, code: r.code });
    } else if (r.service === NetworkService.typeName) {
      this.catalog.inc({ kind: CATALOG_QUERY.test(r.method) ? "query" : "write", code: r.code });
    }
  };

  readonly recordRegistration = (o: RegistrationOutcome): void => {
    this.registrations.inc({ outcome: o.kind });
  };

  readonly recordEngine = (e: EngineEvent): void => {
    if (e.kind === "server-started") this.serverStarts.inc({ restart: String(e.restart) });
    else if (e.kind === "server-crashed") this.serverCrashes.inc();
    else if (e.kind === "session-opened") this.sessionsOpened.inc();
    else if (e.kind === "session-reaped") this.sessionsReaped.inc();
    else if (e.kind === "session-out-of-memory") this.sessionsOutOfMemory.inc();
    else if (e.kind === "session-suspended") {
      this.sessionsSuspended.inc({ why: e.why });
      this.sessionSaveSeconds.observe(e.ms / 1000);
    } else if (e.kind === "session-checkpointed") this.sessionSaveSeconds.observe(e.ms / 1000);
    else if (e.kind === "session-resumed") this.sessionsResumed.inc();
  };
}
