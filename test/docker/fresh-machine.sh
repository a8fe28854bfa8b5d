#!/usr/bin/env bash
# The README's two commands on a fresh machine (not part of `npm test`): `npm run smoke:fresh`.
#
# A bare Debian bookworm with Node 20 (the base test/docker/build-base.sh makes, as `npm run smoke:docker`
# does) plus only `r-base-core` and `r-cran-jsonlite`; this checkout's files copied in (tracked and
# untracked ones, not what .gitignore names: no node_modules, no r-library, no data). Then, as root, as
# written in the README:
# 1. `npm install && npm start`: the server must evaluate `1+1` for the generated administrator (its
#    password read from the file the first start writes when stdout is not a terminal);
# 2. `npm install && npm test`: must pass.
# Removes its container; keeps the images (cache). Exits 0 with "SKIP: <reason>" when no Docker engine
# can be used, 1 on the first failed check.
# Variables: ROCK_BASE_TAG (base image), ROCK_FRESH_TESTS=0 (the start only, not the tests),
# ROCK_SMOKE_DOCKERD=0 (never start dockerd).
set -euo pipefail
cd "$(dirname "$0")/../.."

BASE="${ROCK_BASE_TAG:-rock-ts-base:node20-bookworm}"
IMAGE="rock-ts-fresh:r-base-core"
NAME="rock-ts-fresh-$$"
WORK="$(mktemp -d)"
# shellcheck source=test/docker/engine.sh
. test/docker/engine.sh

say() { printf '%s\n' "fresh: $*"; }
ok() { printf 'ok %s\n' "$*"; }
skip() { printf 'SKIP: %s\n' "$*"; exit 0; }
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  [ -f "$WORK/last.log" ] && { echo "---- last 40 lines ----" >&2; tail -40 "$WORK/last.log" >&2; }
  exit 1
}
cleanup() {
  docker rm -f "$NAME" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  engine_down
}
trap cleanup EXIT

engine_up
ROCK_BASE_TAG="$BASE" test/docker/build-base.sh >"$WORK/last.log" 2>&1 || fail "no base image (test/docker/build-base.sh)"

# ---- the fresh machine: Debian's R and jsonlite, nothing else
if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  say "image $IMAGE: $BASE + r-base-core r-cran-jsonlite"
  printf 'FROM %s\nRUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends r-base-core r-cran-jsonlite ca-certificates && rm -rf /var/lib/apt/lists/*\nENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt\n' "$BASE" |
    docker build -t "$IMAGE" - >"$WORK/last.log" 2>&1 || fail "docker build of $IMAGE"
fi
for absent in gcc make haproxy chromium; do
  docker run --rm "$IMAGE" sh -c "! command -v $absent" >/dev/null || fail "$IMAGE has $absent: not a fresh machine"
done
ok "fresh machine: $(docker run --rm "$IMAGE" sh -c 'echo node $(node --version), $(R --version | head -1)')"

# ---- the checkout, copied in
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf "$WORK/checkout.tar"
# Docker's default capabilities hold the six that confining R sessions under uids of their own takes
# (docs/security.md "Why root in the container, and which capabilities"), and apt's; --init reaps what ended sessions leave.
docker run -d --init --name "$NAME" "$IMAGE" sleep infinity >/dev/null
docker exec -i "$NAME" sh -c 'mkdir -p /root/rock-ts && tar -C /root/rock-ts -xf -' <"$WORK/checkout.tar"
ok "checkout copied ($(tar -tf "$WORK/checkout.tar" | wc -l) files)"

# ---- 1. npm install && npm start, as written
start=$SECONDS
docker exec -d -w /root/rock-ts "$NAME" sh -c 'npm install && npm start >/root/start.log 2>&1'
check='
const base = "http://127.0.0.1:8085";
const fs = require("node:fs");
const file = "/root/rock-ts/data/administrator-password.txt";
(async () => {
  for (let i = 0; i < 600; i++) {
    const up = await fetch(base + "/_check").then((r) => r.status, () => 0);
    if (up === 200 && fs.existsSync(file)) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  const password = fs.readFileSync(file, "utf8").trim();
  const auth = { Authorization: "Basic " + Buffer.from("administrator:" + password).toString("base64") };
  const created = await fetch(base + "/r/sessions", { method: "POST", headers: auth });
  const { id } = await created.json();
  const answer = await fetch(base + "/r/session/" + id + "/_eval", {
    method: "POST", headers: { ...auth, "Content-Type": "application/x-rscript", Accept: "application/json" }, body: "1+1",
  });
  console.log(created.status, answer.status, await answer.text());
})().catch((e) => { console.log("error", e.message); process.exit(1); });
'
answer="$(docker exec "$NAME" node -e "$check" || true)"
docker exec "$NAME" sh -c 'cat /root/start.log 2>/dev/null' >"$WORK/last.log" || true
[ "$answer" = "201 200 2" ] || fail "npm install && npm start: 1+1 as the generated administrator answered '$answer'"
ok "npm install && npm start: the generated administrator evaluates 1+1 = 2 ($((SECONDS - start)) s from a fresh clone)"
grep -h "installing" "$WORK/last.log" | sed 's/^/  /' || true
# SIGTERM to the server (a minimal Debian has no pkill), then at most 30 s for it to end.
stop='
const fs = require("node:fs");
const servers = () => fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p) && p !== String(process.pid)).filter((p) => {
  try { return fs.readFileSync("/proc/" + p + "/cmdline", "utf8").includes("src/cli/bin.js"); } catch { return false; }
});
for (const p of servers()) process.kill(Number(p), "SIGTERM");
const end = Date.now() + 30000;
const wait = () => servers().length === 0 ? process.exit(0) : Date.now() > end ? process.exit(1) : setTimeout(wait, 200);
wait();
'
docker exec "$NAME" node -e "$stop" || fail "the server did not stop on SIGTERM"

# ---- 2. npm install && npm test, as written
if [ "${ROCK_FRESH_TESTS:-1}" = 0 ]; then
  say "ROCK_FRESH_TESTS=0: the tests are not run"
  exit 0
fi
start=$SECONDS
if docker exec -w /root/rock-ts "$NAME" sh -c 'npm install && npm test' >"$WORK/last.log" 2>&1; then
  ok "npm install && npm test: $(grep -E '^ +[0-9]+ passing' "$WORK/last.log" | tail -1 | xargs) in $((SECONDS - start)) s"
  grep -h "^npm test: " "$WORK/last.log" | sed 's/^/  /' || true
else
  cp "$WORK/last.log" /tmp/rock-fresh-test.log
  grep -E "^ +[0-9]+ (passing|failing)" "$WORK/last.log" >&2 || true
  fail "npm install && npm test failed after $((SECONDS - start)) s (whole output: /tmp/rock-fresh-test.log)"
fi
say "PASS"
