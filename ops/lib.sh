# Shared helpers for the local-stack scripts. Sourced, not executed.
# Caches live outside the repository so a fresh clone reuses them.

RV_CACHE="${RULEVALIDATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rulevalidator}"
RV_RUN="${RULEVALIDATOR_RUN:-$RV_CACHE/run}"
mkdir -p "$RV_CACHE" "$RV_RUN"

log() { printf '[%s] %s\n' "$(basename "$0" .sh)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# port_busy PORT: true when something already listens on 127.0.0.1:PORT.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pid_alive FILE: true when FILE names a running process.
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# exited PID: true when PID runs no more: gone, or a zombie that no parent has reaped yet
# (a server started with setsid is reparented, and an init that does not reap keeps it).
exited() { ! kill -0 "$1" 2>/dev/null || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

# stop_pid FILE NAME: stop the process recorded in FILE, politely then firmly.
stop_pid() {
  local file=$1 name=$2 pid
  if ! pid_alive "$file"; then rm -f "$file"; log "$name not running"; return 0; fi
  pid=$(cat "$file")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do exited "$pid" && break; sleep 0.2; done
  exited "$pid" || kill -9 "$pid" 2>/dev/null || true
  rm -f "$file"
  log "$name stopped"
}

# wait_http URL SECONDS: wait until URL answers 2xx.
wait_http() {
  local url=$1 secs=$2 i
  for i in $(seq 1 $((secs * 2))); do
    if curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; then return 0; fi
    sleep 0.5
  done
  return 1
}

# with_lock: hold $LOCKFILE (on fd 9) until the script exits, so that test packages running
# in parallel, each asking for a service, start or build it once instead of racing.
with_lock() {
  exec 9>"$LOCKFILE"
  flock 9
}

# module_version BIN MODULE: the version of Go module MODULE that the binary BIN was built
# from; nothing when BIN is missing or was not built from it.
module_version() {
  [ -x "$1" ] || return 0
  go version -m "$1" 2>/dev/null | awk -v m="$2" '$1 == "mod" && $2 == m {print $3}'
}
