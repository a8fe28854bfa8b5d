import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer, type Server, type Socket } from "node:net";
import { basename } from "node:path";
import type { SessionInstalls } from "../../config/config.js";
import { fromRoot } from "../../package-root.js";
import { RChild } from "./child.js";
import { sessionEnvironment } from "../confine/environment.js";
import type { RouterLinks } from "../confine/network/restricted.js";
import { holdsProof, proofFile, removeProof } from "./proof.js";
import { hasEnded } from "../confine/processes.js";
import { notRunning, sessionNotStarted } from "./faults.js";
import { decodeFields } from "../wire/fields.js";
import { FrameReader, ProtocolError, type Frame } from "../wire/frames.js";
import { forkFrame, PING, versionFrame, type SessionIdentity, type ValueFormat } from "../wire/protocol.js";
import { FROM_SERVER, lettersOf, type Letter } from "../wire/protocol-table.js";
import { signalGroup, signalProcess } from "../confine/signals.js";
import { serverHello, sessionGreeting } from "./greetings.js";

const WORKER_SCRIPT = fromRoot("src/r/process/worker.R");
/** The protocol's constants for the R side, which worker.R reads first (made by `npm run gen`). */
const PROTOCOL_R = fromRoot("gen/r/protocol.R");
/** How a session's state is saved and restored, which worker.R reads second. */
const SESSION_STATE_R = fromRoot("src/r/process/session-state.R");
/** A session's loop (serve, evaluate, the value encoders), which worker.R reads third. */
const SESSION_LOOP_R = fromRoot("src/r/process/session-loop.R");
/** Signals to the owner's other sessions, asked of Node, which worker.R reads fourth. */
const PEER_SIGNALS_R = fromRoot("src/r/process/peer-signals.R");
const START_TIMEOUT_MS = 30_000;
const FORK_TIMEOUT_MS = 15_000;
/** How often a fork not yet connected is looked at: a session that could not start is said this soon. */
const FORK_WATCH_MS = 100;

export interface RServerOptions {
  readonly executable: string;
  /** Where the R processes' console output goes. */
  readonly log: (text: string) => void;
  /** TMPDIR of the R server, so a killed server leaves its temporary folder inside the service's data. */
  readonly tmpDir: string;
  /** A package library searched before R's own (so by every session forked from the server). */
  readonly library?: string;
  /**
   * Searched after R's own libraries (r.setupLibrary: the R packages the start installed there because
   * R's libraries lacked them).
   */
  readonly setupLibrary?: string;
  /** Sessions are forked with an identity of their own (see SessionIdentity); needs root. */
  readonly isolated: boolean;
  /** A file of R code the R server runs before it forks any session (r.profile). */
  readonly profile?: string;
  /** packages.sessionInstalls: with `none`, the server's install.packages() refuses, saying so. */
  readonly sessionInstalls?: SessionInstalls;
  /** packages.repos: what sessions install from when they name no repository (empty: R's own). */
  readonly repos?: readonly string[];
  /** r.sessionNetwork restricted: the router the forks link their network namespaces to. */
  readonly router?: Pick<RouterLinks, "router" | "resolvConf">;
}

interface PendingFork {
  /** The uid whose proof the session's connections must hold (isolated sessions). */
  readonly uid: number | undefined;
  /** Where an isolated session leaves its proof. */
  readonly proofFile: string;
  main?: { socket: Socket; rest: Buffer | undefined; pid: number };
  out?: { socket: Socket; rest: Buffer | undefined };
  readonly resolve: (child: RChild) => void;
  readonly reject: (error: Error) => void;
}

type ServerFrame = Frame<Letter<typeof FROM_SERVER>>;

interface Reply {
  readonly resolve: (frame: ServerFrame) => void;
  readonly reject: (error: Error) => void;
}

/**
 * R builds .libPaths() at start from R_LIBS (then R_LIBS_USER, the site and the default libraries), and
 * forked sessions inherit it: prepending the library there is what makes sessions find packages the
 * service installed. R drops a library folder that does not exist, so the engine creates it first.
 */
function serverEnv(options: RServerOptions): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...sessionEnvironment(process.env), TMPDIR: options.tmpDir };
  if (options.library) env.R_LIBS = env.R_LIBS ? `${options.library}:${env.R_LIBS}` : options.library;
  return env;
}

function workerArgs(executable: string): string[] {
  return basename(executable).startsWith("Rscript")
    ? ["--vanilla", WORKER_SCRIPT, PROTOCOL_R, SESSION_STATE_R, SESSION_LOOP_R, PEER_SIGNALS_R]
    : ["--vanilla", "--slave", "-f", WORKER_SCRIPT, "--args", PROTOCOL_R, SESSION_STATE_R, SESSION_LOOP_R, PEER_SIGNALS_R];
}

/**
 * The R server process: started in its own process group, it connects back over loopback with a
 * secret token and forks one child per session; each child connects back with its own token.
 */
export class RServerProcess {
  readonly version: string;
  readonly pid: number;
  /** Resolves when the R process has exited, whoever ended it. */
  readonly exited: Promise<void>;
  private readonly forks = new Map<string, PendingFork>();
  private readonly replies: Reply[] = [];
  private readonly exitListeners: Array<() => void> = [];
  private hasExited = false;

  private constructor(
    private readonly options: RServerOptions,
    private readonly listener: Server,
    private readonly proc: ChildProcess,
    private readonly control: Socket,
    hello: { version: string; pid: number },
  ) {
    this.version = hello.version;
    this.pid = hello.pid;
    this.exited = new Promise((resolve) => {
      const done = (): void => {
        if (this.hasExited) return;
        this.hasExited = true;
        this.failAll(notRunning());
        this.listener.close();
        this.killGroup();
        for (const listener of this.exitListeners.splice(0)) listener();
        resolve();
      };
      if (proc.exitCode !== null || proc.signalCode !== null) done();
      else proc.once("exit", done);
    });
    listener.on("connection", (socket) => this.greet(socket));
    const reader = new FrameReader(lettersOf(FROM_SERVER));
    control.on("data", (chunk: Buffer) => {
      try {
        for (const frame of reader.push(chunk)) this.replies.shift()?.resolve(frame);
      } catch (error) {
        if (!(error instanceof ProtocolError)) throw error;
        options.log(`The R server broke the protocol (${error.message}): it is stopped\n`);
        this.killGroup();
      }
    });
    control.on("close", () => this.failAll(notRunning()));
    control.on("error", () => undefined);
  }

  static async start(options: RServerOptions): Promise<RServerProcess> {
    const token = randomBytes(32).toString("hex");
    const listener = createServer();
    await new Promise<void>((resolve, reject) => {
      listener.once("error", reject);
      listener.listen(0, "127.0.0.1", resolve);
    });
    const { port } = listener.address() as { port: number };
    // Own process group: stopping the server kills every session it forked. Isolated, the server is
    // started as root again: asking for a uid makes libuv drop the supplementary groups, which the
    // sessions' setgid/setuid would otherwise keep.
    const child = spawn(options.executable, workerArgs(options.executable), {
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
      env: serverEnv(options),
      ...(options.isolated ? { uid: 0, gid: 0 } : {}),
    });
    for (const stream of [child.stdout, child.stderr]) {
      stream?.setEncoding("utf8");
      stream?.on("data", (text: string) => options.log(text));
    }
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(
      `${port}\n${token}\n${options.isolated ? 1 : 0}\n${options.profile ?? ""}\n${options.setupLibrary ?? ""}\n${options.sessionInstalls ?? "auto"}\n${(options.repos ?? []).join(" ")}\n` +
        `${options.router?.router ?? ""}\n${options.router ? JSON.stringify(options.router.resolvConf) : ""}\n`,
    );
    try {
      const { socket, hello } = await new Promise<{ socket: Socket; hello: { version: string; pid: number } }>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("R server did not start in time")), START_TIMEOUT_MS);
        const fail = (error: Error): void => {
          clearTimeout(timer);
          reject(error);
        };
        child.once("error", fail);
        child.once("exit", (code) => fail(new Error(`R server exited during start (code ${code})`)));
        listener.once("connection", (socket: Socket) => {
          serverHello(socket, token).then(
            (hello) => {
              clearTimeout(timer);
              resolve({ socket, hello });
            },
            (error: Error) => {
              socket.destroy();
              fail(error);
            },
          );
        });
      });
      const server = new RServerProcess(options, listener, child, socket, hello);
      socket.resume();
      return server;
    } catch (error) {
      listener.close();
      if (child.pid) signalGroup(child.pid, "SIGKILL");
      throw error;
    }
  }

  get running(): boolean {
    return !this.hasExited;
  }

  onExit(listener: () => void): void {
    if (this.hasExited) listener();
    else this.exitListeners.push(listener);
  }

  /**
   * Forks a session process that starts in `workDir` with `tmpDir` as its tempdir(), as `identity`
   * when the server is isolated; `forked` is told its pid once the R server says it forked it, while
   * it confines itself and connects back (unless it connected first).
   */
  fork(workDir: string, tmpDir: string, identity?: SessionIdentity, forked?: (pid: number) => void): Promise<RChild> {
    if (this.options.isolated && !identity) return Promise.reject(new Error("An isolated R server forks sessions with an identity only"));
    const token = randomBytes(16).toString("hex");
    return new Promise<RChild>((resolve, reject) => {
      const timer = setTimeout(() => fail(new Error("R session did not connect in time")), FORK_TIMEOUT_MS);
      // A session that ends before it connects (its confinement failed) is said at once, not at the timeout.
      let watch: NodeJS.Timeout | undefined;
      const fail = (error: Error): void => {
        const pending = this.forks.get(token);
        this.forks.delete(token);
        clearTimeout(timer);
        clearInterval(watch);
        pending?.main?.socket.destroy();
        pending?.out?.socket.destroy();
        if (pending?.main) signalProcess(pending.main.pid, "SIGKILL");
        reject(error);
      };
      this.forks.set(token, {
        uid: identity?.uid,
        proofFile: proofFile(workDir),
        resolve: (child) => {
          clearTimeout(timer);
          clearInterval(watch);
          resolve(child);
        },
        reject: fail,
      });
      this.request(forkFrame({ token, workDir, tmpDir }, identity)).then((reply) => {
        if (reply.type === FROM_SERVER.forkFailed.letter)
          fail(new Error(`R server could not fork: ${decodeFields(FROM_SERVER.forkFailed, reply.payload).error}`));
        else if (reply.type !== FROM_SERVER.forked.letter) fail(new Error(`R server answered a fork with frame ${reply.type}`));
        else {
          const pid = Number(decodeFields(FROM_SERVER.forked, reply.payload).pid);
          // Not when the session connected before this answer came.
          if (this.forks.has(token)) {
            forked?.(pid);
            watch = setInterval(
              () => void hasEnded(pid).then((ended) => ended && this.forks.has(token) && fail(sessionNotStarted())),
              FORK_WATCH_MS,
            );
          }
        }
      }, fail);
    });
  }

  /** Answers when the R server process reads and answers its socket. */
  async ping(): Promise<void> {
    await this.request(PING);
  }

  /** R.version as JSON (a plain list) or as R serialization. */
  async versionValue(format: ValueFormat): Promise<Buffer> {
    const reply = await this.request(versionFrame(format));
    if (reply.type !== FROM_SERVER.version.letter) throw new Error(`R server answered a version request with frame ${reply.type}`);
    return reply.payload;
  }

  /** Ends the R server and, with its process group, every session it forked. */
  async stop(): Promise<void> {
    if (this.hasExited) return;
    // End of the control socket makes R quit cleanly (removing its temporary folder).
    this.control.end();
    const timer = setTimeout(() => this.killGroup(), 2000);
    this.abandonForks();
    await this.exited;
    clearTimeout(timer);
  }

  private abandonForks(): void {
    for (const pending of this.forks.values()) pending.reject(notRunning());
  }

  private killGroup(): void {
    if (this.proc.pid) signalGroup(this.proc.pid, "SIGKILL");
  }

  private request(frame: Buffer): Promise<ServerFrame> {
    if (this.hasExited || this.control.destroyed) return Promise.reject(notRunning());
    return new Promise((resolve, reject) => {
      this.replies.push({ resolve, reject });
      this.control.write(frame);
    });
  }

  private failAll(error: Error): void {
    for (const reply of this.replies.splice(0)) reply.reject(error);
    for (const pending of [...this.forks.values()]) pending.reject(error);
  }

  private greet(socket: Socket): void {
    sessionGreeting(socket)
      .then(async ({ greeting, rest }) => {
        const pending = this.forks.get(greeting.token);
        if (!pending) {
          socket.destroy();
          return;
        }
        if (pending.uid !== undefined && !(await holdsProof(pending.proofFile, pending.uid, greeting.proof))) {
          // Another session's process that learned the token: it must not become this session.
          socket.destroy();
          return;
        }
        if (this.forks.get(greeting.token) !== pending) {
          socket.destroy();
          return;
        }
        if (greeting.socket === "main") pending.main = { socket, rest, pid: greeting.pid };
        else pending.out = { socket, rest };
        if (!pending.main || !pending.out) return;
        this.forks.delete(greeting.token);
        if (pending.uid !== undefined) void removeProof(pending.proofFile);
        const child = new RChild(pending.main.pid, pending.main.socket, pending.out.socket, this.options.log);
        child.start(pending.main.rest, pending.out.rest);
        pending.resolve(child);
      })
      .catch(() => socket.destroy());
  }
}
