import type { DescMethod } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { retryLater, type Fault } from "../errors/fault.js";
import { onStreamEnd } from "./stream-end.js";

/** Which calls a stopping service still takes, and which ones it waits for. */
export interface DrainPolicy {
  /** Still taken while draining: health, and calls on sessions that exist (their clients finish their work). */
  admits(method: DescMethod): boolean;
  /** Never ends by itself (health Watch, reflection, a followed log): it does not hold the drain. */
  endless(method: DescMethod): boolean;
  /** What a call the stopping service no longer takes answers (a new fault per refusal). */
  refusal(method: DescMethod): Fault;
}

/** What the gate reads and tells of the service's lifecycle (src/server/lifecycle.ts). */
export interface DrainedService {
  /** serving → draining (a stop was asked) → stopped. */
  readonly phase: "serving" | "draining" | "stopped";
  /** A call that holds the drain began, or ended. */
  callStarted(): void;
  callEnded(): void;
}

interface Kind {
  readonly admitted: boolean;
  readonly holds: boolean;
}

/**
 * First of the interceptors, so a refusal costs no password check. Once a stop begins, calls the
 * policy does not admit answer the policy's refusal (503 with Retry-After but for `/_check`); after
 * the drain, only the endless ones (health) are taken. Every call that holds the drain is counted
 * until it ends (a stream: until its last message); one cut short by the stop answers 503 rather
 * than whatever its interruption looked like (an R evaluation says "interrupted", a 400).
 */
export function drainGate(lifecycle: DrainedService, policy: DrainPolicy): Interceptor {
  const kinds = new Map<DescMethod, Kind>();
  const kindOf = (method: DescMethod): Kind => {
    let kind = kinds.get(method);
    if (!kind) kinds.set(method, (kind = { admitted: policy.admits(method), holds: !policy.endless(method) }));
    return kind;
  };
  const cutShort = (signal: AbortSignal): Fault | undefined =>
    signal.aborted && lifecycle.phase === "stopped" ? retryLater("The service stopped before this call ended") : undefined;

  return (next) => async (req) => {
    const kind = kindOf(req.method);
    const phase = lifecycle.phase;
    if (phase !== "serving" && !(kind.admitted && (phase === "draining" || !kind.holds))) {
      throw policy.refusal(req.method);
    }
    if (!kind.holds) return next(req);
    lifecycle.callStarted();
    let streaming = false;
    try {
      const res = await next(req);
      if (!res.stream) return res;
      streaming = true;
      const message = onStreamEnd(res.message, (how) => {
        lifecycle.callEnded();
        return how === "gaveUp" ? undefined : cutShort(req.signal);
      });
      return { ...res, message };
    } catch (error) {
      throw cutShort(req.signal) ?? error;
    } finally {
      if (!streaming) lifecycle.callEnded();
    }
  };
}
