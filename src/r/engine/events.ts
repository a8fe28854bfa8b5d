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
  /** A spare's process died while it waited in the pool; it is replaced at the next demand. */
  | { readonly kind: "spare-died" };
