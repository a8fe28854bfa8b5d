#!/usr/bin/env bash
# Smoke test of the container image on a fresh machine (not part of `npm test`): `npm run smoke:docker`.
#
# Builds the image (on a local base built with debootstrap when node:20-bookworm-slim is not present and
# ROCK_BASE is not given), runs it as compose.yaml does (root, every capability dropped but the ones
# session isolation needs, no-new-privileges) with Rock's environment, waits for the health check, then
# over HTTP: /_info, a session as the configured user, `1+1`, the session's uid (not 0), an upload and its
# download, rockr (the CRAN client, when the host has Rscript and rockr), and a `docker stop` that must
# end in a clean drain (exit 0, no SIGKILL). Removes its container and volume; keeps the images (cache).
#
# Exits 0 with "SKIP: <reason>" when no Docker engine can be used, 1 on the first failed check.
# Variables: ROCK_BASE (base image), ROCK_SMOKE_IMAGE (tag, default rock-ts:smoke), ROCK_SMOKE_NO_BUILD=1
# (use the existing image), ROCK_SMOKE_DOCKERD=0 (never start dockerd), ROCK_SMOKE_CAPS (the capabilities
# added after --cap-drop ALL; default as compose.yaml).
set -euo pipefail
cd "$(dirname "$0")/../.."

IMAGE="${ROCK_SMOKE_IMAGE:-rock-ts:smoke}"
NAME="rock-ts-smoke-$$"
VOLUME="rock-ts-smoke-$$"
STARTED_DOCKERD=""
WORK="$(mktemp -d)"

say() { printf '%s\n' "smoke: $*"; }
ok() { printf 'ok %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; dump; exit 1; }
skip() { printf 'SKIP: %s\n' "$*"; exit 0; }
dump() {
  if docker inspect "$NAME" >/dev/null 2>&1; then
    echo "---- container logs (last 40 lines) ----" >&2
    docker logs --tail 40 "$NAME" >&2 2>&1 || true
  fi
}
cleanup() {
  docker rm -f "$NAME" >/dev/null 2>&1 || true
  docker volume rm "$VOLUME" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  if [ -n "$STARTED_DOCKERD" ]; then kill "$STARTED_DOCKERD" 2>/dev/null || true; fi
}
trap cleanup EXIT

# ---- a Docker engine: the running one, or dockerd started here (root, Debian's docker.io)
command -v docker >/dev/null 2>&1 || skip "no docker client on PATH"
if ! docker info >/dev/null 2>&1; then
  if [ "${ROCK_SMOKE_DOCKERD:-1}" = 0 ] || [ "$(id -u)" != 0 ] || ! command -v dockerd >/dev/null 2>&1; then
    skip "no Docker engine answers, and dockerd cannot be started here (needs root and dockerd)"
  fi
  for opts in "" "--iptables=false --storage-driver=vfs"; do
    say "starting dockerd $opts (log: /tmp/rock-smoke-dockerd.log)"
    # shellcheck disable=SC2086
    dockerd $opts >/tmp/rock-smoke-dockerd.log 2>&1 &
    STARTED_DOCKERD=$!
    for _ in $(seq 30); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 && break
    kill "$STARTED_DOCKERD" 2>/dev/null || true; wait "$STARTED_DOCKERD" 2>/dev/null || true; STARTED_DOCKERD=""
  done
  docker info >/dev/null 2>&1 || skip "dockerd did not start (see /tmp/rock-smoke-dockerd.log)"
fi
command -v curl >/dev/null 2>&1 || skip "curl is missing"

# ---- the image
if [ -z "${ROCK_SMOKE_NO_BUILD:-}" ]; then
  BASE="${ROCK_BASE:-}"
  if [ -z "$BASE" ]; then
    if docker image inspect node:20-bookworm-slim >/dev/null 2>&1; then
      BASE=node:20-bookworm-slim
    else
      BASE="${ROCK_BASE_TAG:-rock-ts-base:node20-bookworm}"
      say "node:20-bookworm-slim is not here: base $BASE (debootstrap + this host's Node, cached by tag)"
      test/docker/build-base.sh || skip "no base image: node:20-bookworm-slim absent and test/docker/build-base.sh failed"
    fi
  fi
  say "docker build --build-arg BASE=$BASE -t $IMAGE ."
  start=$SECONDS
  docker build --build-arg BASE="$BASE" -t "$IMAGE" . >"$WORK/build.log" 2>&1 ||
    { tail -30 "$WORK/build.log" >&2; fail "docker build failed"; }
  say "built in $((SECONDS - start)) s"
fi
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
ok "image $IMAGE: $((size / 1000000)) MB"

# ---- run it as compose.yaml does (ROCK_SMOKE_CAPS overrides the capabilities, to see which are needed)
RUN_SECURITY="--cap-drop ALL --security-opt no-new-privileges:true"
for cap in ${ROCK_SMOKE_CAPS-SETUID SETGID KILL CHOWN DAC_OVERRIDE FOWNER}; do RUN_SECURITY+=" --cap-add $cap"; done
USER_PW="$(head -c 18 /dev/urandom | base64 | tr -d '/+=')"
docker volume create "$VOLUME" >/dev/null
docker run -d --name "$NAME" $RUN_SECURITY \
  -p 127.0.0.1::8085 -v "$VOLUME:/data" \
  -e ROCK_ID=smoke-node -e ROCK_CLUSTER=smoke -e ROCK_TAGS=docker,smoke \
  -e ROCK_ADMINISTRATOR_NAME=admin -e ROCK_ADMINISTRATOR_PASSWORD=admin \
  -e ROCK_USER_NAME=smoke-user -e ROCK_USER_PASSWORD="$USER_PW" \
  "$IMAGE" >/dev/null
PORT="$(docker port "$NAME" 8085/tcp | head -1 | sed 's/.*://')"
URL="http://127.0.0.1:$PORT"
say "container $NAME at $URL"

say "waiting for the health check"
for _ in $(seq 120); do
  status="$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$NAME")"
  case "$status" in
    "running healthy") break ;;
    running*) sleep 1 ;;
    *) fail "container is $status" ;;
  esac
done
[ "$status" = "running healthy" ] || fail "not healthy after 120 s ($status)"
ok "healthy"

# ---- checks over HTTP
json_field() { sed -n "s/.*\"$1\": *\"\\{0,1\\}\\([^\",}]*\\).*/\\1/p" | head -1; }
USER_AUTH="smoke-user:$USER_PW"

info="$(curl -fsS "$URL/_info")" || fail "/_info"
echo "$info" | grep -q '"smoke-node"' || fail "/_info does not give ROCK_ID: $info"
echo "$info" | grep -q '"smoke"' || fail "/_info does not give ROCK_CLUSTER: $info"
ok "/_info: $info"

code="$(curl -s -o /dev/null -w '%{http_code}' -u "smoke-user:wrong" -X POST "$URL/r/sessions")"
[ "$code" = 401 ] || fail "a wrong password answers $code, not 401"
ok "wrong password: 401"

session="$(curl -fsS -u "$USER_AUTH" -X POST "$URL/r/sessions")" || fail "create a session as smoke-user"
SID="$(echo "$session" | json_field id)"
[ -n "$SID" ] || fail "no session id in $session"
echo "$session" | grep -q '"smoke-user"' || fail "session not owned by smoke-user: $session"
ok "session $SID as smoke-user"

r_eval() { curl -fsS -u "$USER_AUTH" -H 'Content-Type: application/x-rscript' -H 'Accept: application/json' \
  --data-binary "$1" "$URL/r/session/$SID/_eval"; }
two="$(r_eval '1+1')" || fail "eval 1+1"
[ "$(echo "$two" | tr -d '[] \n')" = 2 ] || fail "1+1 gave $two"
ok "eval 1+1 = $two"

uid="$(r_eval 'unix::getuid()' | tr -d '[] \n')" || fail "eval unix::getuid()"
case "$uid" in ''|*[!0-9]*) fail "unix::getuid() gave '$uid'" ;; esac
[ "$uid" != 0 ] || fail "the session runs as root"
ok "session uid $uid (not 0)"
procs="$(docker exec "$NAME" ps -eo uid=,comm= 2>/dev/null || docker exec "$NAME" sh -c 'for p in /proc/[0-9]*; do echo "$(stat -c %u $p) $(cat $p/comm)"; done')"
echo "$procs" | grep -Eq "^ *$uid +R\b" || fail "no R process of uid $uid in the container: $procs"
ok "an R process of uid $uid runs in the container"
pid1="$(docker exec "$NAME" cat /proc/1/comm)"
[ "$pid1" = tini ] || fail "PID 1 is $pid1, not tini"
ok "PID 1 is tini"
secret="$(r_eval 'tryCatch(readLines("/proc/1/environ"), error = function(e) "refused")' || true)"
echo "$secret" | grep -q "$USER_PW" && fail "a session reads the service's environment"
ok "a session cannot read the service's environment"

head -c 4096 /dev/urandom >"$WORK/up.bin"
up="$(curl -fsS -u "$USER_AUTH" -F "file=@$WORK/up.bin" "$URL/r/session/$SID/_upload?path=smoke/up.bin")" ||
  fail "upload"
echo "$up" | grep -q '4096' || fail "upload answered $up"
curl -fsS -u "$USER_AUTH" -o "$WORK/down.bin" "$URL/r/session/$SID/_download?path=smoke/up.bin" || fail "download"
cmp -s "$WORK/up.bin" "$WORK/down.bin" || fail "downloaded bytes differ from the uploaded ones"
owner="$(r_eval 'file.info("smoke/up.bin")$uid' | tr -d '[] \n')"
[ "$owner" = "$uid" ] || fail "uploaded file owned by $owner, not the session's uid $uid"
ok "upload and download of 4096 bytes, file owned by uid $owner"

curl -fsS -u "$USER_AUTH" -X DELETE "$URL/r/session/$SID" >/dev/null || fail "delete the session"
ok "session deleted"

# rockr, the R client from CRAN, with test/interop/rockr-client.R (user admin/admin as it expects).
if command -v Rscript >/dev/null 2>&1 && Rscript -e 'quit(status = !requireNamespace("rockr", quietly = TRUE))' >/dev/null 2>&1; then
  if ROCK_URL="$URL" ROCKR_PART=session Rscript --vanilla test/interop/rockr-client.R >"$WORK/rockr.log" 2>&1 &&
     grep -q '^done' "$WORK/rockr.log"; then
    ok "rockr: $(grep -c '^ok ' "$WORK/rockr.log") checks of test/interop/rockr-client.R"
  else
    cat "$WORK/rockr.log" >&2; fail "rockr against the container"
  fi
else
  say "rockr part skipped: no Rscript with rockr on this host"
fi

# ---- SIGTERM (docker stop) drains and exits 0, with a session open
curl -fsS -u "$USER_AUTH" -X POST "$URL/r/sessions" >/dev/null || fail "a session before stopping"
start=$SECONDS
docker stop -t 45 "$NAME" >/dev/null
took=$((SECONDS - start))
exit_code="$(docker inspect -f '{{.State.ExitCode}} {{.State.OOMKilled}}' "$NAME")"
[ "$exit_code" = "0 false" ] || fail "docker stop: exit '$exit_code' after ${took} s (137 = killed at the grace period)"
ok "docker stop: drained and exited 0 in ${took} s"

# ---- the volume keeps the data: a second container on it starts healthy
docker rm "$NAME" >/dev/null
docker run -d --name "$NAME" $RUN_SECURITY -v "$VOLUME:/data" \
  -e ROCK_ADMINISTRATOR_NAME=admin -e ROCK_ADMINISTRATOR_PASSWORD=admin "$IMAGE" >/dev/null
for _ in $(seq 120); do
  status="$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$NAME")"
  case "$status" in "running healthy") break ;; running*) sleep 1 ;; *) fail "restart on the volume: $status" ;; esac
done
[ "$status" = "running healthy" ] || fail "restart on the volume: not healthy ($status)"
ok "restarted on the same volume: healthy"

echo "PASS: container smoke test"
