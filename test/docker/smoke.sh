#!/usr/bin/env bash
# Smoke test of the container image on a fresh machine (not part of `npm test`): `npm run smoke:docker`.
#
# Builds the image (on node:20-bookworm-slim when that image is present or ROCK_BASE names a base, else on
# the local stand-in test/docker/build-base.sh makes with debootstrap), then, with root's capabilities as
# compose.yaml gives them (--cap-drop ALL, the six isolation needs, SYS_ADMIN and NET_ADMIN, the sysctl
# net.ipv4.ip_forward=1, no-new-privileges):
# 1. each capability dropped alone: for the six isolation needs (SETUID SETGID KILL CHOWN DAC_OVERRIDE
#    FOWNER) the start is refused (exit 1) with a message naming it, and with none added too; without
#    SYS_ADMIN or NET_ADMIN (what r.sessionNetwork auto's restricted network needs) it starts, warns that
#    sessions have the host's network naming the missing capability, reports the policy `host` in /_info,
#    and a session reaches the service's port on the container's 127.0.0.1 (without SYS_ADMIN also the
#    warning that sessions see the whole file system);
# 2. for the six, the same runs with that start check bypassed (the service started without its command
#    line): the step that needs the capability fails where it is used, and no session ever evaluates as
#    root;
# 3. a run as compose.yaml does it (root, every capability dropped but those, the sysctl,
#    no-new-privileges, a network of its own as compose makes) with Rock's environment: the health check,
#    then over HTTP /_info (and the policy `restricted`), a session as the configured user, `1+1`, the
#    session's uid (not 0), its network (the service's port on its 127.0.0.1, the container's own address
#    and 169.254.169.254 refused within 2 s; the container's name resolved through the service's DNS
#    relay when the container resolves it, else said and skipped; makePSOCKcluster(2) on its own
#    loopback), an interrupt, an upload and its download, a session folder made sticky removed with the
#    session, rockr (the CRAN client, when the host has Rscript and rockr), a `docker stop` that must end
#    in a clean drain (exit 0, no SIGKILL) suspending the open session, and a restart on the same volume
#    where that session answers with its value and still has the restricted network;
# 4. quotas: the same with the host's cgroup hierarchy read-write and ROCK_R_QUOTAS=required.
# Removes its containers, network and volumes; keeps the images (cache). Never contacts an address
# outside the machine (the image's build aside: Debian's mirror, npm, CRAN).
#
# Exits 0 with "SKIP: <reason>" when no Docker engine can be used, 1 on the first failed check.
# Variables: ROCK_BASE (base image), ROCK_SMOKE_IMAGE (tag, default rock-ts:smoke), ROCK_SMOKE_NO_BUILD=1
# (use the existing image), ROCK_SMOKE_DOCKERD=0 (never start dockerd), ROCK_SMOKE_CAPS (the capabilities
# added after --cap-drop ALL; default as compose.yaml; parts 1 and 2 drop each of them in turn; without
# SYS_ADMIN and NET_ADMIN part 3 expects the policy `host`), ROCK_SMOKE_SYSCTLS (the --sysctl of every
# run; default as compose.yaml).
set -euo pipefail
cd "$(dirname "$0")/../.."

IMAGE="${ROCK_SMOKE_IMAGE:-rock-ts:smoke}"
CAPS="${ROCK_SMOKE_CAPS-SETUID SETGID KILL CHOWN DAC_OVERRIDE FOWNER SYS_ADMIN NET_ADMIN}"
SYSCTLS="${ROCK_SMOKE_SYSCTLS-net.ipv4.ip_forward=1}"
# What the default r.sessionNetwork (auto) and the sessions' mount namespaces use, where they can be had:
# without them the start warns and falls back (the host's network, the host's files), it is not refused.
FALLBACK_CAPS="SYS_ADMIN NET_ADMIN"
# Docker's default AppArmor profile (where AppArmor is on) refuses the mounts of those namespaces: the
# service then says so and falls back even with SYS_ADMIN.
APPARMOR="$(grep -qx Y /sys/module/apparmor/parameters/enabled 2>/dev/null && echo on || true)"
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
    docker network ls -q --filter "label=$LABEL" | xargs -r docker network rm >/dev/null 2>&1 || true
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
# --cap-drop ALL, then the capabilities given, and $SYSCTLS, as compose.yaml does.
security() {
  local s="--cap-drop ALL --security-opt no-new-privileges:true" c
  for c in "$@"; do s+=" --cap-add $c"; done
  for c in $SYSCTLS; do s+=" --sysctl $c"; done
  echo "$s"
}
# $CAPS without $1.
caps_without() { local c out=(); for c in $CAPS; do [ "$c" = "$1" ] || out+=("$c"); done; echo "${out[*]:-}"; }
# Whether $1 is one the start falls back without (warned) rather than refuses.
falls_back() { case " $FALLBACK_CAPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# Whether $CAPS has $1.
has_cap() { case " $CAPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# Waits up to $2 s for container $1 to be healthy; prints its last "<state> <health>".
wait_healthy() {
  local status
  for _ in $(seq "$2"); do
    status="$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$1")"
    case "$status" in running\ healthy|exited*|dead*) break ;; esac
    sleep 1
  done
  echo "$status"
}
# The service's warning lines (their message) in the logs of container $1.
warnings_of() { docker logs "$1" 2>&1 | grep '"level":"warn"' | sed -n 's/.*"msg":"\([^"]*\)".*/\1/p' || true; }
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
# R code defining probe(host, port): a TCP connection to host:port with a 3 s timeout, "<connected|failed>
# <seconds> <R's condition>" (a refusal fails at once, a timeout after 3 s).
PROBE_R='probe <- function(host, port) {
  t0 <- proc.time()[["elapsed"]]
  what <- tryCatch({ con <- socketConnection(host, port, open = "r+b", blocking = TRUE, timeout = 3); close(con); "connected -" },
    warning = function(w) paste("failed", conditionMessage(w)), error = function(e) paste("failed", conditionMessage(e)))
  took <- proc.time()[["elapsed"]] - t0
  what <- strsplit(what, " ")[[1]]
  paste(what[1], sprintf("%.3f", took), paste(what[-1], collapse = " "))
}'
# A string answered as JSON ("failed 0.003 …", or ["…"]) made plain text.
unjson() { sed 's/^\[\{0,1\}"//; s/"\]\{0,1\}$//'; }
# The seconds a probe's answer $1 says the connection took, in milliseconds.
probe_ms() { awk '{ printf "%d", $2 * 1000 }' <<<"$1"; }
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

# ---- 1. each capability dropped alone: the start is refused, naming it; or, for SYS_ADMIN and NET_ADMIN,
# it starts with the host's network (r.sessionNetwork auto), warned
say "part 1: each of [$CAPS] dropped alone (and none added): the start must be refused, naming it (for [$FALLBACK_CAPS]: warned, the host's network)"
for cap in $CAPS NONE; do
  if [ "$cap" = NONE ]; then name="$NAME-caps-none"; kept=""; else name="$NAME-no-$cap"; kept="$(caps_without "$cap")"; fi
  # shellcheck disable=SC2046
  docker run -d --name "$name" --label "$LABEL" $(security $kept) -p 127.0.0.1::8085 \
    -e ROCK_ADMINISTRATOR_NAME=admin -e ROCK_ADMINISTRATOR_PASSWORD=admin "$IMAGE" >/dev/null
done
for cap in $CAPS NONE; do
  if [ "$cap" = NONE ]; then name="$NAME-caps-none"; else name="$NAME-no-$cap"; fi
  if falls_back "$cap"; then
    # Not refused: the start says which capability sessions' network (and, for SYS_ADMIN, their mount
    # namespaces) lack, /_info says `host`, and a session indeed reaches the container's loopback.
    status="$(wait_healthy "$name" 120)"
    [ "$status" = "running healthy" ] || DUMP="$name" fail "without $cap: not healthy ($status); it should start with a warning"
    url="http://127.0.0.1:$(port_of "$name")"
    # (Under AppArmor the profile is named before NET_ADMIN is looked at.)
    named="CAP_$cap"; [ -n "$APPARMOR" ] && [ "$cap" != SYS_ADMIN ] && named="AppArmor"
    warned="$(warnings_of "$name" | grep -m1 "R sessions have the host's network (r.sessionNetwork auto): .*$named" || true)"
    [ -n "$warned" ] || DUMP="$name" fail "without $cap: no warning that sessions have the host's network naming $named: $(warnings_of "$name")"
    files="$(warnings_of "$name" | grep -m1 "R sessions see the host's whole file system" || true)"
    if [ "$cap" = SYS_ADMIN ]; then
      [ -n "$files" ] || DUMP="$name" fail "without SYS_ADMIN: no warning that sessions see the host's whole file system"
    elif [ -z "$APPARMOR" ]; then
      [ -z "$files" ] || DUMP="$name" fail "without $cap (SYS_ADMIN kept): warned that sessions see the host's files: $files"
    fi
    info="$(curl -fsS "$url/_info")" || DUMP="$name" fail "without $cap: /_info"
    policy="$(echo "$info" | json_field sessionNetwork)"
    [ "$policy" = host ] || DUMP="$name" fail "without $cap: /_info says sessionNetwork '$policy', not host: $info"
    read -r status sid <<<"$(open_session "$url" admin:admin)"
    [ "${status:0:1}" = 2 ] || DUMP="$name" fail "without $cap: no session ($status)"
    uid="$(eval_in "$url" admin:admin "$sid" 'unix::getuid()' | tr -d '[] \n')"
    case "$uid" in ''|*[!0-9]*|0) DUMP="$name" fail "without $cap: a session evaluates as uid '$uid'" ;; esac
    reached="$(eval_in "$url" admin:admin "$sid" "$PROBE_R; probe(\"127.0.0.1\", 8085)" | unjson)"
    [ "${reached%% *}" = connected ] || DUMP="$name" fail "without $cap: a session on the host's network does not reach the service's port on 127.0.0.1: $reached"
    reason="$(echo "$warned" | sed 's/.*(r.sessionNetwork auto): //; s/ (docker run.*//')"
    ok "without $cap: started, /_info sessionNetwork $policy, warned that sessions have the host's network: $reason${files:+, and that they see the whole file system}; a session (uid $uid) reaches the service's port on the container's 127.0.0.1"
    docker rm -f -v "$name" >/dev/null
    continue
  fi
  code="$(exit_code_of "$name" 60)"
  [ "$code" = 1 ] || DUMP="$name" fail "without $cap: exit status $code, not 1 (the start should have been refused)"
  message="$(docker logs "$name" 2>&1 | grep -m1 '^rock-ts: the service runs as root' || true)"
  [ -n "$message" ] || DUMP="$name" fail "without $cap: no message saying which capability is missing"
  if [ "$cap" = NONE ]; then
    for c in $CAPS; do falls_back "$c" || echo "$message" | grep -q "lacks .*$c" || fail "with none added, the message does not name $c: $message"; done
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
# SYS_ADMIN and NET_ADMIN have no start check to bypass: part 1 started the service without each.
STRICT_CAPS="$(for c in $CAPS; do falls_back "$c" || printf '%s ' "$c"; done)"
say "part 2: each of [${STRICT_CAPS% }] dropped alone, the start check bypassed: the step needing it must fail, no session as root"
for cap in $STRICT_CAPS; do
  # shellcheck disable=SC2046
  docker run -d --name "$NAME-deep-$cap" --label "$LABEL" $(security $(caps_without "$cap")) -p 127.0.0.1::8085 \
    -e ROCK_ADMINISTRATOR_NAME=admin -e ROCK_ADMINISTRATOR_PASSWORD=admin \
    --entrypoint /usr/bin/tini "$IMAGE" -s -- \
    sh -c 'printf "%s\n" "$0" >/tmp/unchecked.mjs && exec node /tmp/unchecked.mjs' "$UNCHECKED" >/dev/null
done
for cap in $STRICT_CAPS; do
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
# On a network of its own, as compose makes for its project: Docker's DNS (127.0.0.11) answers the
# container's name there, a name sessions can resolve through the service's relay without any outside
# resolver.
if ! has_cap SYS_ADMIN || ! has_cap NET_ADMIN; then EXPECT_NET=host
elif [ -n "$APPARMOR" ]; then
  EXPECT_NET=host
  say "AppArmor is on here: Docker's default profile refuses the mounts of the sessions' namespaces, so compose.yaml's container gives sessions the host's network (its security_opt apparmor=unconfined, commented out, would not)"
else EXPECT_NET=restricted; fi
say "part 3: the full set [$CAPS], sysctls [$SYSCTLS], on a network of its own (sessions' network expected: $EXPECT_NET)"
USER_PW="$(head -c 18 /dev/urandom | base64 | tr -d '/+=')"
docker volume create --label "$LABEL" "$VOLUME" >/dev/null
docker network create --label "$LABEL" "$NAME" >/dev/null
# shellcheck disable=SC2046
docker run -d --name "$NAME" --label "$LABEL" $(security $CAPS) --network "$NAME" \
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
policy="$(echo "$info" | json_field sessionNetwork)"
[ "$policy" = "$EXPECT_NET" ] || fail "/_info says sessionNetwork '$policy', not $EXPECT_NET: $info ($(warnings_of "$NAME" | grep -m1 "host's network" || true))"
ok "/_info: $info"

code="$(curl -s -o /dev/null -w '%{http_code}' -u "smoke-user:wrong" -X POST "$URL/r/sessions")"
[ "$code" = 401 ] || fail "a wrong password answers $code, not 401"
ok "wrong password: 401"

session="$(curl -fsS -u "$USER_AUTH" -X POST "$URL/r/sessions")" || fail "create a session as smoke-user"
SID="$(echo "$session" | json_field id)"
[ -n "$SID" ] || fail "no session id in $session"
echo "$session" | grep -q '"smoke-user"' || fail "session not owned by smoke-user: $session"
ok "session $SID as smoke-user"

r_eval() { curl -fsS --max-time 180 -u "$USER_AUTH" -H 'Content-Type: application/x-rscript' -H 'Accept: application/json' \
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

# The session's network (docs/security.md "Session network"): what it must not reach is refused at once
# (a TCP reset, not a timeout), its own loopback works. Nothing here leaves the machine: the metadata
# address is refused inside the container, and the name resolved is the container's own.
# Prints "failed|connected <seconds> <R's condition>" for a connection from session $SID to $1:$2.
net_probe() { r_eval "$PROBE_R; probe(\"$1\", $2)" | unjson; }
if [ "$EXPECT_NET" = restricted ]; then
  ip="$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$NAME" | awk '{print $1}')"
  [ -n "$ip" ] || fail "no address of the container in docker inspect"
  # The service answers there (so that a session's failure to connect is the rules', not a closed port).
  docker exec "$NAME" node -e "require('net').connect(8085, '$ip').on('connect', () => process.exit(0)).on('error', () => process.exit(1))" ||
    fail "the service does not answer on the container's address $ip:8085"
  refused=""
  for target in 127.0.0.1:8085 "$ip:8085" 169.254.169.254:80; do
    answer="$(net_probe "${target%:*}" "${target##*:}")" || fail "probing $target from a session"
    ms="$(probe_ms "$answer")"
    [ "${answer%% *}" = failed ] || fail "a session connected to $target: $answer"
    [ "$ms" -lt 2000 ] || fail "a session's connection to $target failed after $ms ms, not refused at once (a timeout?): $answer"
    refused+="${refused:+, }$target in $ms ms"
  done
  ok "restricted network: refused at once from a session: $refused (127.0.0.1 is the session's own loopback; the service listens on the container's)"

  psock="$(r_eval 'local({ cl <- parallel::makePSOCKcluster(2); tryCatch(unlist(parallel::clusterEvalQ(cl, 1 + 1)), finally = parallel::stopCluster(cl)) })')" ||
    fail "parallel::makePSOCKcluster(2) in a session: $psock"
  [ "$(echo "$psock" | tr -d '[] \n')" = 2,2 ] || fail "parallel::makePSOCKcluster(2) evaluating 1 + 1 gave $psock"
  ok "parallel::makePSOCKcluster(2) in a session (its own loopback): 1 + 1 on each worker = $psock"

  # Names: the session's resolv.conf names the relay; the container's name is answered by Docker's DNS
  # only (not in /etc/hosts), so resolving it from the session goes through the relay.
  ns_session="$(r_eval 'paste(grep("^nameserver", readLines("/etc/resolv.conf"), value = TRUE), collapse = ", ")' | unjson)"
  ns_container="$(docker exec "$NAME" sh -c 'grep "^nameserver" /etc/resolv.conf | paste -sd, -' || true)"
  resolved_here="$(docker exec "$NAME" getent hosts "$NAME" | awk '{print $1}' || true)"
  in_hosts="$(r_eval "any(grepl(\"$NAME\", readLines(\"/etc/hosts\"), fixed = TRUE))" | tr -d '[] \n')"
  if [ -z "$resolved_here" ]; then
    say "DNS check skipped: the container itself does not resolve its name $NAME (its resolvers: $ns_container)"
  elif [ "$in_hosts" != false ]; then
    say "DNS check skipped: the session's /etc/hosts names $NAME, so resolving it would not go through the relay"
  elif [ "$ns_session" = "$ns_container" ]; then
    fail "the session's resolv.conf ($ns_session) is the container's, not the relay's"
  else
    resolved="$(r_eval "x <- utils::nsl(\"$NAME\"); if (is.null(x)) \"none\" else x" | unjson)"
    [ "$resolved" = "$resolved_here" ] || fail "a session resolves $NAME to '$resolved', the container to $resolved_here (session's $ns_session, container's $ns_container)"
    ok "names: a session resolves $NAME to $resolved through the relay ($ns_session; the container's: $ns_container)"
  fi
else
  say "sessions' network checks skipped: [$CAPS] lacks SYS_ADMIN or NET_ADMIN, sessions have the host's network"
fi

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
docker run -d --name "$NAME" --label "$LABEL" $(security $CAPS) --network "$NAME" -p 127.0.0.1::8085 -v "$VOLUME:/data" \
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
policy="$(curl -fsS "$URL/_info" | json_field sessionNetwork)"
[ "$policy" = "$EXPECT_NET" ] || fail "after the restart /_info says sessionNetwork '$policy', not $EXPECT_NET"
if [ "$EXPECT_NET" = restricted ]; then
  answer="$(net_probe 127.0.0.1 8085)" || fail "probing 127.0.0.1:8085 from the resumed session"
  ms="$(probe_ms "$answer")"
  [ "${answer%% *}" = failed ] && [ "$ms" -lt 2000 ] || fail "the resumed session's connection to 127.0.0.1:8085: $answer"
  ok "after the restart: sessionNetwork $policy, the resumed session refused 127.0.0.1:8085 in $ms ms"
fi

# What compose.yaml's container says of what it cannot have (docs/security.md, "Why root in the container,
# and which capabilities"): quotas (no writable cgroup); with SYS_ADMIN and NET_ADMIN, nothing of its
# sessions' files or network.
warnings="$(warnings_of "$NAME")"
echo "$warnings" | grep -q 'R sessions have no quotas' || fail "no warning that sessions have no quotas without a writable cgroup"
if has_cap SYS_ADMIN && [ -z "$APPARMOR" ]; then
  ! echo "$warnings" | grep -q "R sessions see the host's\|R sessions share the host's" || fail "with SYS_ADMIN, warned of the host's files: $warnings"
  users="$(r_eval 'length(readLines("/etc/passwd"))' | tr -d '[] \n')"
  [ "$users" = 2 ] || fail "with SYS_ADMIN, the session's /etc/passwd has $users lines, not 2 (root, session)"
else
  echo "$warnings" | grep -q "R sessions see the host's whole file system" || fail "no warning that sessions see the host's files (no CAP_SYS_ADMIN, or AppArmor)"
fi
if [ "$EXPECT_NET" = restricted ]; then
  ! echo "$warnings" | grep -q "R sessions have the host's network" || fail "warned that sessions have the host's network: $warnings"
else
  echo "$warnings" | grep -q "R sessions have the host's network" || fail "no warning that sessions have the host's network"
fi
ok "as compose.yaml runs it: warned of no quotas (no writable cgroup)$(has_cap SYS_ADMIN && [ -z "$APPARMOR" ] && echo '; sessions in a minimal root (passwd: root and session)'), sessions' network $EXPECT_NET; warnings: $(echo "$warnings" | cut -c1-100 | paste -sd'|' -)"
docker rm -f -v "$NAME" >/dev/null

# ---- 4. confined: with what docs/security.md ("Why root in the container") adds for quotas and namespaces
say "part 4: quotas and namespaces (SYS_ADMIN, the host's cgroup hierarchy read-write)"
# shellcheck disable=SC2046
docker run -d --name "$NAME" --label "$LABEL" $(security $CAPS $(has_cap SYS_ADMIN || echo SYS_ADMIN)) \
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
