import crypto from "node:crypto";
import fs from "node:fs";
import tls from "node:tls";
import type { TlsConfig } from "../config/config.js";

/** What the port serves HTTPS with. The key goes to Node's TLS and nowhere else (never a log line). */
export interface TlsCredentials {
  /** PEM certificate chain, the server's certificate first. */
  readonly cert: Buffer;
  /** PEM private key of that certificate. */
  readonly key: Buffer;
}

/**
 * Reads and checks the configured certificate and key; undefined when TLS is not configured. Done
 * before anything else starts, so that a wrong file refuses the start with its name rather than
 * failing every handshake later. Messages carry OpenSSL's reason, never the files' content.
 */
export function readTlsCredentials(c: TlsConfig): TlsCredentials | undefined {
  if (c.cert === "" && c.key === "") return undefined;
  const cert = readFile("tls.cert", c.cert);
  const key = readFile("tls.key", c.key);
  check(() => tls.createSecureContext({ cert }), `tls.cert ${c.cert}: not a PEM certificate`);
  check(() => crypto.createPrivateKey(key), `tls.key ${c.key}: not an unencrypted PEM private key`);
  check(() => tls.createSecureContext({ cert, key }), `tls.key ${c.key} is not the key of tls.cert ${c.cert}`);
  return { cert, key };
}

function readFile(setting: string, file: string): Buffer {
  if (file === "") throw new Error(`${setting} is not set: tls.cert and tls.key (ROCK_TLS_CERT, ROCK_TLS_KEY) go together`);
  try {
    return fs.readFileSync(file);
  } catch (e) {
    throw new Error(`${setting} ${file}: cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
}

function check(attempt: () => unknown, problem: string): void {
  try {
    attempt();
  } catch (e) {
    throw new Error(`${problem} (${(e as Error).message})`);
  }
}
