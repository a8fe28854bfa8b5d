import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Temporary access keys: `<base64url(id \n expiry day)>.<base64url(HMAC-SHA256)>`. Nothing is stored;
 * the secret alone decides, so rotating it revokes every key.
 */

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;

/** Start (UTC) of a `YYYY-MM-DD` day, or undefined when it is not a real date. */
export function dayStart(day: string): number | undefined {
  const m = DAY.exec(day);
  if (!m) return undefined;
  const t = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  return new Date(t).toISOString().slice(0, 10) === day ? t : undefined;
}

function sign(secret: Buffer, payload: string): Buffer {
  return createHmac("sha256", secret).update(payload).digest();
}

export function issueShareKey(secret: Buffer, id: string, expiryDay: string): string {
  const payload = `${id}\n${expiryDay}`;
  return `${Buffer.from(payload).toString("base64url")}.${sign(secret, payload).toString("base64url")}`;
}

/** True when `key` was issued for network `id` and its expiry day has not begun at `now`. */
export function shareKeyGrants(secret: Buffer, key: string, id: string, now: number): boolean {
  const [encoded, signature, extra] = key.split(".");
  if (encoded === undefined || signature === undefined || extra !== undefined) return false;
  const payload = Buffer.from(encoded, "base64url").toString();
  const expected = sign(secret, payload);
  const given = Buffer.from(signature, "base64url");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return false;
  const newline = payload.lastIndexOf("\n");
  if (payload.slice(0, newline) !== id) return false;
  const expiry = dayStart(payload.slice(newline + 1));
  return expiry !== undefined && now < expiry;
}
