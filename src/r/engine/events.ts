/** What the engine tells its owner; facts only, never R code or what R prints. */
export type EngineEvent =
  | { readonly kind: "server-started"; readonly restart: boolean; readonly version: string }
  | { readonly kind: "server-start-failed"; readonly restart: boolean; readonly error: string }
  | { readonly kind: "server-stopped" }
  | { readonly kind: "server-crashed"; readonly autoRestart: boolean }
  | { readonly kind: "session-opened"; readonly id: string; readonly user: string }
  | { readonly kind: "session-closed"; readonly id: string; readonly user: string }
  | { readonly kind: "session-out-of-memory"; readonly id: string; readonly user: string; readonly reason: string }
  | { readonly kind: "session-reaped"; readonly id: string; readonly user: string }
  /** Its state saved (`lost`: what could not be), its process ended; `ms`: the save and the end. */
  | {
      readonly kind: "session-suspended";
      readonly id: string;
      readonly user: string;
      readonly why: "idle" | "asked" | "stop";
      readonly ms: number;
      readonly bytes: number;
      readonly lost: readonly string[];
    }
  /** Its state saved, its process living on. */
  | { readonly kind: "session-checkpointed"; readonly id: string; readonly user: string; readonly ms: number; readonly bytes: number }
  /** Brought back in a new process from its saved state. */
  | { readonly kind: "session-resumed"; readonly id: string; readonly user: string; readonly ms: number }
  /** Its state could not be saved or restored: the session lives on as it was (or, at a stop, as its last save). */
  | { readonly kind: "session-save-failed" | "session-resume-failed"; readonly id: string; readonly user: string; readonly error: string }
  /** Ended: the saved sessions' disk (r.suspendedMaxMb) was full and it was idle longest. */
  | { readonly kind: "session-evicted"; readonly id: string; readonly user: string; readonly reason: string }
  /** The start found sessions of the previous run: those with a saved state are back (suspended), the others ended. */
  | { readonly kind: "sessions-restored"; readonly restored: readonly string[]; readonly ended: readonly string[] }
  /** A spare's process died while it waited in the pool; it is replaced at the next demand. */
  | { readonly kind: "spare-died" };
