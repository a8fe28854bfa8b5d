import type { RChild, SignalRequest } from "../process/child.js";
import { bootSeconds, processIdentity, signalAs, USER_HZ } from "../confine/processes.js";
import type { RSession } from "../session/session.js";
import type { Fork } from "./homes.js";

export interface PeerSignalsOptions {
  /** The open session of this id. */
  readonly session: (id: string) => RSession | undefined;
  /** The R server's pid while it runs. */
  readonly serverPid: () => number | undefined;
}

/**
 * What a session may do to the processes of its owner's other sessions: signal them, as their owner may
 * end any of them (DELETE) or interrupt it. An isolated session sees only its own uid's processes and
 * kill(2) refuses it every other uid's, so Armadillo's way to end a busy session of its own,
 * `ps::ps_terminate(ps::ps_handle(pid))` evaluated in another, failed: the session now asks the
 * service (src/r/process/peer-signals.R), which grants a request only for a process of an open session of the
 * same owner (the Rock account) and signals it itself. Every other answer is the same refusal, so a
 * session cannot tell another account's process from a pid no process has. Sessions that are not
 * isolated all run as the service's user and signal each other themselves: none of theirs is granted.
 */
export class PeerSignals {
  /** Each isolated session's current process and the uid it runs as (no other session's), by session id. */
  private readonly processes = new Map<string, { readonly child: RChild; readonly uid: number }>();

  constructor(private readonly options: PeerSignalsOptions) {}

  /** Session `id` runs as `fork` now (undefined: it has no process); its requests are decided here. */
  track(id: string, fork: Fork | undefined): void {
    if (fork?.uid === undefined) {
      this.processes.delete(id);
      return;
    }
    this.processes.set(id, { child: fork.child, uid: fork.uid });
    fork.child.answerSignals((request) => this.grant(id, request));
  }

  /**
   * Carries out the request of session `asker` when its pid is a process of an open session of the same
   * owner that started when the session's handle says: answers when that process started (seconds since
   * the epoch, as ps counts), undefined otherwise. An interrupt of a session's own R process is the
   * service's (as POST …/_interrupt), which keeps its protocol's account of interrupts; any other signal
   * is sent as that session's uid, so the kernel lets it reach nothing else even if the pid was taken
   * meanwhile.
   */
  private async grant(asker: string, { pid, signal, startTime }: SignalRequest): Promise<number | undefined> {
    if (pid <= 1 || pid === process.pid || pid === this.options.serverPid()) return undefined;
    const owner = this.options.session(asker)?.subject;
    const found = owner === undefined ? undefined : await processIdentity(pid);
    if (found?.uid === undefined) return undefined;
    const target = this.sessionOf(found.uid);
    if (!target || target.session.closed || target.session.subject !== owner) return undefined;
    const boot = await bootSeconds();
    if (startTime !== undefined && Math.round((startTime - boot) * USER_HZ) !== found.startTicks) return undefined;
    // ps's own arithmetic, so that the handle R makes of it equals the one ps would.
    const started = boot + found.startTicks * (1 / USER_HZ);
    if (signal === "none") return started;
    if (signal === "INT" && pid === target.child.pid) {
      target.session.interrupt();
      return started;
    }
    return (await signalAs(found.uid, pid, signal)) ? started : undefined;
  }

  private sessionOf(uid: number): { readonly session: RSession; readonly child: RChild } | undefined {
    for (const [id, held] of this.processes) {
      if (held.uid !== uid) continue;
      const session = this.options.session(id);
      return session && { session, child: held.child };
    }
    return undefined;
  }
}
