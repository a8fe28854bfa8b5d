/**
 * The environment R processes get: what R and its tools need, nothing of the service's own (users,
 * secrets and configuration given through the environment stay in Node).
 */
const SESSION_NAMES = new Set(["PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR"]);
const SESSION_PREFIXES = ["LC_", "R_"];
/** Package operations also download, so they keep the proxy settings. */
const DOWNLOAD_NAMES = new Set(["http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"]);

export function sessionEnvironment(env: NodeJS.ProcessEnv): Record<string, string> {
  return { ...utf8Locale(env), ...pick(env, (name) => SESSION_NAMES.has(name) || SESSION_PREFIXES.some((p) => name.startsWith(p))) };
}

/**
 * A service started with no locale (a bare container, a service manager's empty environment) would
 * give R the C locale, where it prints every non-ASCII character as `<c3><a9>`: R gets C.UTF-8 then
 * (glibc's, always there). A locale the environment sets is kept as it is.
 */
function utf8Locale(env: NodeJS.ProcessEnv): Record<string, string> {
  return env.LC_ALL || env.LC_CTYPE || env.LANG ? {} : { LANG: "C.UTF-8" };
}

export function packageEnvironment(env: NodeJS.ProcessEnv): Record<string, string> {
  return { ...sessionEnvironment(env), ...pick(env, (name) => DOWNLOAD_NAMES.has(name)) };
}

function pick(env: NodeJS.ProcessEnv, keep: (name: string) => boolean): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (value !== undefined && keep(name)) out[name] = value;
  return out;
}
