/** The path of a request target, its query left off (`/a/b?x=1` → `/a/b`); `/` when there is none. */
export function pathOf(target: string | undefined): string {
  const t = target ?? "/";
  const q = t.indexOf("?");
  return q < 0 ? t : t.slice(0, q);
}
