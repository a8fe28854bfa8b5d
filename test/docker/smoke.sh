#!/usr/bin/env bash
# Smoke test of the container image on a fresh machine (not part of `npm test`): `npm run smoke:docker`.
#
# Builds the image (on node:20-bookworm-slim when that image is present or ROCK_BASE names a base, else on
# the local stand-in test/docker/build-base.sh makes with debootstrap), then:
# 1. each capability the service relies on, dropped alone: the start is refused (exit 1) with a message
#    naming it;
# 2. the same runs with that start check bypassed (the service started without its command line): the step
#    that needs the capability fails where it is used, and no session ever evaluates as root;
# 3. a run as compose.yaml does it (root, every capability dropped but those, no-new-privileges) with
#    Rock's environment: the health check, then over HTTP /_info, a session as the configured user, `1+1`,
#    the session's uid (not 0), an interrupt, an upload and its download, a session folder made sticky
#    removed with the session, rockr (the CRAN client, when the host has Rscript and rockr), a `docker stop`
#    that must end in a clean drain (exit 0, no SIGKILL) suspending the open session, and a restart on the
#    same volume where that session answers with its value.
# Removes its containers and volumes; keeps the images (cache).
#
# Exits 0 with "SKIP: <reason>" when no Docker engine can be used, 1 on the first failed check.
# Variables: ROCK_BASE (base image), ROCK_SMOKE_IMAGE (tag, default rock-ts:smoke), ROCK_SMOKE_NO_BUILD=1
# (use the existing image), ROCK_SMOKE_DOCKERD=0 (never start dockerd), ROCK_SMOKE_CAPS (the capabilities
# added after --cap-drop ALL; default as compose.yaml; parts 1 and 2 drop each of them in turn).
set -euo pipefail
cd "$(dirname "$0")/../.."

IMAGE="${ROCK_SMOKE_IMAGE:-rock-ts:smoke}"
CAPS="${ROCK_SMOKE_CAPS-SETUID SETGID KILL CHOWN DAC_OVERRIDE FOWNER}"
NAME="rock-ts-smoke-$$"
VOLUME="rock-ts-smoke-$$"
LABEL="rock-ts-smoke=$$"
WORK="$(mktemp -d)"
# shellcheck source=test/docker/engine.sh
. test/docker/engine.sh

say() { printf '%s\n' "smoke: $*"; }
ok() { printf 'ok %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; dump; exit 1; }
skip() { printf 'SKIP: %s\n' "$*"; exit 0; }
dump() {
  if docker inspect "${DUMP:-$NAME}" >/dev/null 2>&1; then
    echo "---- logs of ${DUMP:-$NAME} (last 40 lines) ----" >&2
    docker logs --tail 40 "${DUMP:-$NAME}" >&2 2>&1 || true
  fi
}
cleanup() {
  if [ -n "$STARTED_DOCKERD" ] || docker info >/dev/null 2>&1; then
    docker ps -aq --filter "label=$LABEL" | xargs -r docker rm -f -v >/dev/null 2>&1 || true
    docker volume rm "$VOLUME" >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
  engine_down
}
trap cleanup EXIT

# ---- a Docker engine: the running one, or dockerd started here (root, Debian's docker.io)
engine_up
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

# ---- helpers for the runs below
# --cap-drop ALL, then the capabilities given, as compose.yaml does.
security() { local s="--cap-drop ALL --security-opt no-new-privileges:true" c; for c in "$@"; do s+=" --cap-add $c"; done; echo "$s"; }
# $CAPS without $1.
caps_without() { local c out=(); for c in $CAPS; do [ "$c" = "$1" ] || out+=("$c"); done; echo "${out[*]:-}"; }
port_of() { docker port "$1" 8085/tcp | head -1 | sed 's/.*://'; }
# Exit code of container $1 once it ended, within $2 s; "running" when it did not end.
exit_code_of() {
  for _ in $(seq "$2"); do
    [ "$(docker inspect -f '{{.State.Status}}' "$1")" = exited ] && { docker inspect -f '{{.State.ExitCode}}' "$1"; return 0; }
    sleep 1
  done
  echo running
}
# Once container $1 logged the end of its R server's start (done or failed, within 60 s), /_check at $2
# until it answers 200, three times at most; prints its last status, or "none" without a start logged.
wait_r() {
  local code=none
  for _ in $(seq 60); do docker logs "$1" 2>&1 | grep -q '"msg":"R server start' && { code=""; break; }; sleep 1; done
  [ "$code" = none ] && { echo none; return 0; }
  for _ in 1 2 3; do
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$2/_check")"
    [ "$code" = 200 ] && break
    sleep 1
  done
  echo "$code"
}
json_field() { sed -n "s/.*\"$1\": *\"\\{0,1\\}\\([^\",}]*\\).*/\\1/p" | head -1; }
# POST /r/sessions as $2 (user:password) at $1: "<status> <session id>".
open_session() {
  local body
  body="$(curl -s -u "$2" -X POST -w '\n%{http_code}' "$1/r/sessions")"
  echo "$(echo "$body" | tail -1) $(echo "$body" | head -n -1 | json_field id)"
}
# Evaluates $4 in session $3 at $1 as $2; prints the answer (the error body when R failed).
eval_in() { curl -sS -u "$2" -H 'Content-Type: application/x-rscript' -H 'Accept: application/json' --data-binary "$4" "$1/r/session/$3/_eval"; }
# R code making a folder with a file in it, then the folder sticky (chmod 1777): only the file's owner,
# the folder's owner or CAP_FOWNER can remove that file, so root needs FOWNER to remove the session.
STICKY_R='dir.create("sticky"); writeLines("x", "sticky/f"); Sys.chmod("sticky", "1777", use_umask = FALSE); format(file.info("sticky")$mode)'
# Evaluates `Sys.sleep(8)` in session $3 at $1 as $2, interrupts it after 1 s; prints "<seconds> <answer>".
interrupted_eval() {
  local start=$SECONDS answer
  eval_in "$1" "$2" "$3" 'Sys.sleep(8); "ran to its end"' >"$WORK/interrupt.out" 2>&1 &
  local pid=$!
  sleep 1
  curl -fsS -u "$2" -X POST "$1/r/session/$3/_interrupt" >"$WORK/interrupt.answer" || true
  wait "$pid" || true
  answer="$(cat "$WORK/interrupt.out")"
  echo "$((SECONDS - start)) $answer"
}
# The service's first error line mentioning $2 in the logs of container $1.
error_line() { docker logs "$1" 2>&1 | grep '"level":"error"' | grep -m1 -o "$2[^\\\"]*" || true; }

# ---- 1. each capability dropped alone: the start is refused, naming it
say "part 1: each of [$CAPS] dropped alone (and none added): the start must be refused, naming it"
for cap in $CAPS NONE; do
  if [ "$cap" = NONE ]; then name="$NAME-caps-none"; kept=""; else name="$NAME-no-$cap"; kept="$(caps_without "$cap")"; fi
  # shellcheck disable=SC2046
  docker run -d --name "$name" --label "$LABEL" $(security $kept) \
    -e ROCK_ADMINISTRATOR_NAME=admin -e ROCK_ADMINISTRATOR_PASSWORD=admin "$IMAGE" >/dev/null
done
for cap in $CAPS NONE; do
  if [ "$cap" = NONE ]; then name="$NAME-caps-none"; else name="$NAME-no-$cap"; fi
  code="$(exit_code_of "$name" 60)"
  [ "$code" = 1 ] || DUMP="$name" fail "without $cap: exit status $code, not 1 (the start should have been refused)"
  message="$(docker logs "$name" 2>&1 | grep -m1 '^rock-ts: the service runs as root' || true)"
  [ -n "$message" ] || DUMP="$name" fail "without $cap: no message saying which capability is missing"
  if [ "$cap" = NONE ]; then
    for c in $CAPS; do echo "$message" | grep -q "lacks .*$c" || fail "with none added, the message does not name $c: $message"; done
    ok "none added: refused, exit 1: $(echo "$message" | grep -o 'lacks [A-Z_, ]*')"
  else
    echo "$message" | grep -q "lacks $cap (" || fail "without $cap, the message names something else: $message"
    ok "without $cap: refused, exit 1: $(echo "$message" | grep -o "lacks $cap ([^;)]*")"
  fi
  docker rm -f -v "$name" >/dev/null
done

# ---- 2. the same without the start check: where each capability is used, its absence is loud
# What src/main.ts does after the command line (which holds the check): load the configuration, start,
# handle SIGTERM (which also keeps what startRock returns reachable: dropped, sessions die when it is
# collected). A module file, not `node -e`: worker threads inherit node's options, --input-type breaks them.
UNCHECKED='const { loadConfig } = await import("/app/dist/src/config/load.js");
const { createLogger } = await import("/app/dist/src/server/logger.js");
const { startRock } = await import("/app/dist/src/compose.js");
const { installSignalHandlers } = await import("/app/dist/src/shutdown.js");
const config = loadConfig(undefined);
const logger = createLogger(config.log);
installSignalHandlers(await startRock(config, { logger }), logger);'
say "part 2: each dropped alone, the start check bypassed: the step needing it must fail, no session as root"
for cap in $CAPS; do
  # shellcheck disable=SC2046
  docker run -d --name "$NAME-deep-$cap" --label "$LABEL" $(security $(caps_without "$cap")) -p 127.0.0.1::8085 \
    -e ROCK_ADMINISTRATOR_NAME=admin -e ROCK_ADMINISTRATOR_PASSWORD=admin \
    --entrypoint /usr/bin/tini "$IMAGE" -s -- \
    sh -c 'printf "%s\n" "$0" >/tmp/unchecked.mjs && exec node /tmp/unchecked.mjs' "$UNCHECKED" >/dev/null
done
for cap in $CAPS; do
  name="$NAME-deep-$cap"
  url="http://127.0.0.1:$(port_of "$name")"
  check="$(wait_r "$name" "$url")"
  [ "$check" != none ] || DUMP="$name" fail "without $cap, unchecked: the R server's start was not logged within 60 s"
  read -r status sid <<<"$(open_session "$url" admin:admin)"
  if [ "${status:0:1}" = 2 ]; then
    # A session that opened must run as a uid of its own whatever is missing.
    uid="$(eval_in "$url" admin:admin "$sid" 'unix::getuid()' | tr -d '[] \n')"
    case "$uid" in ''|*[!0-9]*|0) DUMP="$name" fail "without $cap: a session opened and evaluates as uid '$uid'" ;; esac
  fi
  case "$cap" in
    SETUID|SETGID|CHOWN|DAC_OVERRIDE)
      [ "$check" != 200 ] || DUMP="$name" fail "without $cap: /_check answers 200"
      [ "${status:0:1}" != 2 ] || DUMP="$name" fail "without $cap: a session opened (as uid $uid)"
      case "$cap" in SETUID|SETGID) why="$(error_line "$name" 'Error: spawn EPERM')" ;; CHOWN) why="$(error_line "$name" 'Error: EPERM: operation not permitted, chown')" ;; *) why="$(error_line "$name" 'Error: EACCES: permission denied')" ;; esac
      [ -n "$why" ] || DUMP="$name" fail "without $cap: the service logged no error saying why sessions fail"
      ok "without $cap, unchecked: no session opens (POST /r/sessions $status, /_check $check), logged: ${why:0:90}"
      ;;
    KILL)
      [ "${status:0:1}" = 2 ] || DUMP="$name" fail "without KILL: no session ($status)"
      read -r took answer <<<"$(interrupted_eval "$url" admin:admin "$sid")"
      [ "$took" -ge 6 ] || DUMP="$name" fail "without KILL an interrupt worked (${took} s: $answer): KILL may not be needed"
      ok "without KILL, unchecked: sessions run as uid $uid, but an interrupt is lost (the evaluation ran ${took} s: $answer; /_interrupt said $(cat "$WORK/interrupt.answer")): the service cannot signal another uid"
      ;;
    FOWNER)
      [ "${status:0:1}" = 2 ] || DUMP="$name" fail "without FOWNER: no session ($status)"
      eval_in "$url" admin:admin "$sid" "$STICKY_R" >/dev/null
      deleted="$(curl -s -o /dev/null -w '%{http_code}' -u admin:admin -X DELETE "$url/r/session/$sid")"
      # A DELETE answers before the session's folders are removed: their removal is tried after it.
      [ "${deleted:0:1}" = 2 ] || DUMP="$name" fail "without FOWNER, DELETE answered $deleted"
      sleep 2
      docker exec "$name" test -e "/data/sessions/$sid/work/sticky/f" ||
        DUMP="$name" fail "without FOWNER the sticky folder of a session was removed: FOWNER may not be needed"
      said="$(curl -s -u admin:admin "$url/rserver/_log?limit=1000" | grep -m1 "R session $sid: .*tried again" || true)"
      [ -n "$said" ] || DUMP="$name" fail "without FOWNER, the console log does not say that the session's folder could not be removed"
      ok "without FOWNER, unchecked: sessions run as uid $uid, but one that made its folder sticky is not removed (its folder left, the console log: ${said:0:90})"
      ;;
    *)
      ok "without $cap, unchecked: POST /r/sessions $status, /_check $check (no expectation for $cap)"
      ;;
  esac
  docker rm -f -v "$name" >/dev/null
done

# ---- 3. run it as compose.yaml does
say "part 3: the full set [$CAPS]"
USER_PW="$(head -c 18 /dev/urandom | base64 | tr -d '/+=')"
docker volume create --label "$LABEL" "$VOLUME" >/dev/null
# shellcheck disable=SC2046
docker run -d --name "$NAME" --label "$LABEL" $(security $CAPS) \
  -p 127.0.0.1::8085 -v "$VOLUME:/data" \
  -e ROCK_ID=smoke-node -e ROCK_CLUSTER=smoke -e ROCK_TAGS=docker,smoke \
  -e ROCK_ADMINISTRATOR_NAME=admin -e ROCK_ADMINISTRATOR_PASSWORD=admin \
  -e ROCK_USER_NAME=smoke-user -e ROCK_USER_PASSWORD="$USER_PW" \
  "$IMAGE" >/dev/null
URL="http://127.0.0.1:$(port_of "$NAME")"
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

# KILL: the service signals a process of another uid.
read -r took answer <<<"$(interrupted_eval "$URL" "$USER_AUTH" "$SID")"
echo "$answer" | grep -q 'interrupted' || fail "an interrupt did not interrupt Sys.sleep(8) (${took} s): $answer"
[ "$took" -le 4 ] || fail "the interrupt took effect only after ${took} s"
[ "$(r_eval '1+1' | tr -d '[] \n')" = 2 ] || fail "the session does not answer after an interrupt"
ok "interrupt: Sys.sleep(8) ended after ${took} s ($answer), the session lives on"

head -c 4096 /dev/urandom >"$WORK/up.bin"
up="$(curl -fsS -u "$USER_AUTH" -F "file=@$WORK/up.bin" "$URL/r/session/$SID/_upload?path=smoke/up.bin")" ||
  fail "upload"
echo "$up" | grep -q '4096' || fail "upload answered $up"
curl -fsS -u "$USER_AUTH" -o "$WORK/down.bin" "$URL/r/session/$SID/_download?path=smoke/up.bin" || fail "download"
cmp -s "$WORK/up.bin" "$WORK/down.bin" || fail "downloaded bytes differ from the uploaded ones"
owner="$(r_eval 'file.info("smoke/up.bin")$uid' | tr -d '[] \n')"
[ "$owner" = "$uid" ] || fail "uploaded file owned by $owner, not the session's uid $uid"
ok "upload and download of 4096 bytes, file owned by uid $owner"

# FOWNER: the session's folder goes with it, even a part the session made sticky.
mode="$(r_eval "$STICKY_R")" || fail "making a sticky folder in the session"
curl -fsS -u "$USER_AUTH" -X DELETE "$URL/r/session/$SID" >/dev/null || fail "delete the session"
docker exec "$NAME" test ! -e "/data/sessions/$SID" || fail "the folder of session $SID is left after DELETE"
ok "session deleted, its folder removed (with a sticky folder in it, mode $mode)"

# rockr, the R client from CRAN, with test/interop/rockr-client.R (user admin/admin as it expects).
# rockr is where `npm test` installs it: the setup library (r-library).
export R_LIBS="$PWD/r-library${R_LIBS:+:$R_LIBS}"
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

# ---- SIGTERM (docker stop) drains and exits 0, with a session open, which it suspends
session="$(curl -fsS -u "$USER_AUTH" -X POST "$URL/r/sessions")" || fail "a session before stopping"
SID="$(echo "$session" | json_field id)"
[ "$(r_eval 'kept <- paste("before", "the", "stop"); TRUE' | tr -d '[] \n')" = true ] || fail "assign before stopping"
start=$SECONDS
docker stop -t 45 "$NAME" >/dev/null
took=$((SECONDS - start))
exit_code="$(docker inspect -f '{{.State.ExitCode}} {{.State.OOMKilled}}' "$NAME")"
[ "$exit_code" = "0 false" ] || fail "docker stop: exit '$exit_code' after ${took} s (137 = killed at the grace period)"
ok "docker stop: drained and exited 0 in ${took} s"

docker logs "$NAME" 2>&1 | grep -q 'R session suspended for the stop' || fail "the session was not suspended at the stop"
ok "the session open at the stop was suspended"

# ---- the volume keeps the data: a second container on it starts healthy, with the session
docker rm "$NAME" >/dev/null
# shellcheck disable=SC2046
# The same users as the first (an upgrade keeps its configuration): the session is smoke-user's.
docker run -d --name "$NAME" --label "$LABEL" $(security $CAPS) -p 127.0.0.1::8085 -v "$VOLUME:/data" \
  -e ROCK_ID=smoke-node -e ROCK_ADMINISTRATOR_NAME=admin -e ROCK_ADMINISTRATOR_PASSWORD=admin \
  -e ROCK_USER_NAME=smoke-user -e ROCK_USER_PASSWORD="$USER_PW" "$IMAGE" >/dev/null
for _ in $(seq 120); do
  status="$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$NAME")"
  case "$status" in "running healthy") break ;; running*) sleep 1 ;; *) fail "restart on the volume: $status" ;; esac
done
[ "$status" = "running healthy" ] || fail "restart on the volume: not healthy ($status)"
ok "restarted on the same volume: healthy"
URL="http://127.0.0.1:$(port_of "$NAME")"
kept="$(r_eval 'kept')" || fail "the session of the first container does not answer in the second"
[ "$kept" = '"before the stop"' ] || fail "the session's value after the restart: $kept"
ok "the session of the first container resumed in the second with its value"

# What compose.yaml's container says of quotas and namespaces it cannot have (docs/security.md, "Quotas, a minimal root, private /tmp and no network in a container").
logs="$(docker logs "$NAME" 2>&1)"
echo "$logs" | grep -q 'R sessions have no quotas' || fail "no warning that sessions have no quotas without a writable cgroup"
echo "$logs" | grep -q "R sessions see the host's whole file system" || fail "no warning that sessions see the host's files without CAP_SYS_ADMIN"
ok "as compose.yaml runs it: warned, no quotas and the host's files (no writable cgroup, no CAP_SYS_ADMIN)"
docker rm -f -v "$NAME" >/dev/null

# ---- 4. confined: with what docs/security.md ("Why root in the container") adds for quotas and namespaces
say "part 4: quotas and namespaces (+ SYS_ADMIN, the host's cgroup hierarchy read-write)"
# shellcheck disable=SC2046
docker run -d --name "$NAME" --label "$LABEL" $(security $CAPS SYS_ADMIN) \
  --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw -p 127.0.0.1::8085 \
  -e ROCK_ADMINISTRATOR_NAME=admin -e ROCK_ADMINISTRATOR_PASSWORD=admin -e ROCK_R_SESSION_MEMORY_MB=150 \
  -e ROCK_R_QUOTAS=required "$IMAGE" >/dev/null
URL="http://127.0.0.1:$(port_of "$NAME")"
for _ in $(seq 120); do
  status="$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$NAME")"
  case "$status" in "running healthy") break ;; running*) sleep 1 ;; *) fail "confined: $status" ;; esac
done
[ "$status" = "running healthy" ] || fail "confined: not healthy ($status)"
logs="$(docker logs "$NAME" 2>&1)"
! echo "$logs" | grep -q "R sessions see the host's\|R sessions share the host's" || fail "confined: still warned of the host's files: $logs"
SID="$(curl -fsS -u admin:admin -X POST "$URL/r/sessions" | json_field id)"
[ -n "$SID" ] || fail "confined: no session"
USER_AUTH=admin:admin
group="$(r_eval 'grep("rock-sessions", readLines("/proc/self/cgroup"), value = TRUE)[1]')"
echo "$group" | grep -q "rock-sessions-.*$SID" || fail "confined: the session is in no group of its own: $group"
users="$(r_eval 'length(readLines("/etc/passwd"))' | tr -d '[] \n')"
[ "$users" = 2 ] || fail "confined: the session's /etc/passwd has $users lines, not 2 (root, session)"
ok "confined: the session in its own group ($group), in a minimal root (passwd: root and session)"
code="$(curl -s -o "$WORK/oom.json" -w '%{http_code}' -u admin:admin -H 'Content-Type: application/x-rscript' -H 'Accept: application/json' \
  --data-binary 'x <- numeric(40e6); length(x)' "$URL/r/session/$SID/_eval")"
[ "$code" = 429 ] && grep -q 'memory limit of 150 MiB reached' "$WORK/oom.json" || fail "confined: past 150 MiB answered $code $(cat "$WORK/oom.json")"
ok "confined: a session past its 150 MiB ended, 429: $(cat "$WORK/oom.json" | head -c 120)"

echo "PASS: container smoke test"
