import { readFileSync } from "node:fs";

/**
 * What a service running as root needs to give every R session a uid of its own (docs/security.md "Why root in the container, and which capabilities").
 * Root in a container (`--cap-drop ALL`) or under a service manager's bounding set can lack some; then
 * sessions fail one way or another, and a missing KILL even silently (an interrupt is sent and lost), so
 * the start is refused instead, naming what is missing.
 */
export const ISOLATION_CAPABILITIES: ReadonlyArray<{ readonly name: string; readonly bit: number; readonly use: string }> = [
  { name: "SETUID", bit: 7, use: "sessions switch to their own uid" },
  { name: "SETGID", bit: 6, use: "sessions switch to their own gid, the R server drops supplementary groups" },
  { name: "KILL", bit: 5, use: "interrupting an evaluation signals a process of another uid" },
  { name: "CHOWN", bit: 0, use: "each session is given its folders and uploaded files" },
  { name: "DAC_OVERRIDE", bit: 1, use: "the service creates, reads and removes files in session folders that are 0700 and the session's" },
  { name: "FOWNER", bit: 3, use: "the service removes what a session left in a folder it made sticky" },
];

/**
 * The isolation capabilities missing from the effective set in `status` (the text of /proc/self/status);
 * undefined when that cannot be told (not Linux).
 */
export function missingIsolationCapabilities(status?: string): typeof ISOLATION_CAPABILITIES | undefined {
  const effective = effectiveCapabilities(status);
  if (effective === undefined) return undefined;
  return ISOLATION_CAPABILITIES.filter((c) => (effective & (1n << BigInt(c.bit))) === 0n);
}

/** The effective capability set of `status` (this process's by default); undefined where it cannot be read. */
function effectiveCapabilities(status?: string): bigint | undefined {
  let text = status;
  if (text === undefined) {
    try {
      text = readFileSync("/proc/self/status", "utf8");
    } catch {
      return undefined;
    }
  }
  const hex = /^CapEff:\s*([0-9a-f]+)$/im.exec(text)?.[1];
  return hex === undefined ? undefined : BigInt(`0x${hex}`);
}

/** Why a start as root lacking `missing` is refused, and what to do. */
export function missingCapabilitiesMessage(missing: typeof ISOLATION_CAPABILITIES): string {
  const names = missing.map((c) => c.name);
  return (
    `the service runs as root, so every R session gets a uid of its own, which needs the capabilities ` +
    `${ISOLATION_CAPABILITIES.map((c) => c.name).join(", ")}; this process lacks ${names.join(", ")} ` +
    `(${missing.map((c) => `${c.name}: ${c.use}`).join("; ")}). ` +
    `Add ${missing.length === 1 ? "it" : "them"} (docker run ${names.map((n) => `--cap-add ${n}`).join(" ")}; compose: cap_add)`
  );
}

/** CAP_SYS_ADMIN: making a mount namespace (sessions' private temporary folders). */
export const SYS_ADMIN = 21;

/** CAP_NET_ADMIN: network devices, addresses and nftables (sessions' restricted network). */
export const NET_ADMIN = 12;

/** Whether this process has capability `bit` in its effective set (false where that cannot be told). */
export function hasCapability(bit: number): boolean {
  const effective = effectiveCapabilities();
  return effective !== undefined && (effective & (1n << BigInt(bit))) !== 0n;
}
