# Sourced by the docker smoke tests: a Docker engine to use, the running one or dockerd started here
# (root, Debian's docker.io). Defines engine_up (calls skip when none can be had) and engine_down; the
# caller defines say and skip.
STARTED_DOCKERD=""

engine_up() {
  command -v docker >/dev/null 2>&1 || skip "no docker client on PATH"
  docker info >/dev/null 2>&1 && return 0
  if [ "${ROCK_SMOKE_DOCKERD:-1}" = 0 ] || [ "$(id -u)" != 0 ] || ! command -v dockerd >/dev/null 2>&1; then
    skip "no Docker engine answers, and dockerd cannot be started here (needs root and dockerd)"
  fi
  local opts
  for opts in "" "--iptables=false --storage-driver=vfs"; do
    say "starting dockerd $opts (log: /tmp/rock-smoke-dockerd.log)"
    # shellcheck disable=SC2086
    dockerd $opts >/tmp/rock-smoke-dockerd.log 2>&1 &
    STARTED_DOCKERD=$!
    for _ in $(seq 30); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 && return 0
    kill "$STARTED_DOCKERD" 2>/dev/null || true; wait "$STARTED_DOCKERD" 2>/dev/null || true; STARTED_DOCKERD=""
  done
  skip "dockerd did not start (see /tmp/rock-smoke-dockerd.log)"
}

engine_down() {
  if [ -n "$STARTED_DOCKERD" ]; then
    kill "$STARTED_DOCKERD" 2>/dev/null || true
    wait "$STARTED_DOCKERD" 2>/dev/null || true
  fi
}
