import { evalFrame } from "../wire/protocol.js";
import type { RServerProcess } from "../process/rserver.js";
import type { Fork, SessionHomes } from "./homes.js";
import type { SparePool } from "./spares.js";

/** How long Check waits for a probe session to be forked and to answer. */
const CHECK_TIMEOUT_MS = 5_000;
const PROBE_SCRIPT = evalFrame(Buffer.from("1"), "json");

/**
 * True when `server` runs and a session can be served: within CHECK_TIMEOUT_MS the R server answers
 * its socket and a session process (a spare, or one forked for the purpose) evaluates `1`. The probe
 * then goes back to being a spare (`1` leaves nothing in it) or is ended, so a Check never leaves a
 * process behind; spares that died since the last demand (killed from outside) are replaced.
 */
export async function probe(server: RServerProcess | undefined, pool: SparePool, homes: SessionHomes): Promise<boolean> {
  if (!server?.running) return false;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), CHECK_TIMEOUT_MS)));
  /** `work` before the deadline, or undefined; a fork that completes late is ended as soon as it does. */
  const inTime = async (work: Promise<Fork | undefined>): Promise<Fork | undefined> => {
    const got = await Promise.race([work, deadline]);
    if (got !== "timeout") return got;
    void work.then(
      (late) => homes.release(late),
      () => undefined,
    );
    return undefined;
  };
  /** The server answers its socket and the session evaluates `1`, before the deadline. */
  const serves = async (fork: Fork): Promise<boolean> => {
    // The server must answer too: a ready spare alone would hide a server that can fork no more.
    const answers = Promise.all([fork.child.run(PROBE_SCRIPT), server.ping()]);
    const outcome = await Promise.race([answers, deadline]);
    return outcome !== "timeout" && outcome[0].ok && outcome[0].value.toString("utf8") === "1";
  };
  let fork: Fork | undefined;
  let ok = false;
  const taken = pool.lend();
  try {
    fork = taken && (await inTime(taken));
    if (fork && !(await serves(fork))) {
      if (!fork.child.closed) return false;
      // The spare had died (killed from outside): that says nothing about the next session.
      await homes.release(fork);
      fork = undefined;
    }
    if (!fork) {
      fork = await inTime(homes.fork(server));
      if (!fork || !(await serves(fork))) return false;
    }
    ok = true;
    return true;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
    if (taken) pool.returned();
    if (fork) {
      if (ok) await pool.keep(fork, server);
      else await homes.release(fork);
    }
    if (ok) pool.fill();
  }
}
