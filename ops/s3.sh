#!/usr/bin/env bash
# Local S3-compatible object storage: versitygw (Go, Apache-2.0) in posix mode on 127.0.0.1,
# built once with `go install` and cached. Buckets are directories under the data dir.
#
#   ops/s3.sh install   build versitygw into the cache (once per version)
#   ops/s3.sh start     install, start, wait until it answers, create the default bucket
#   ops/s3.sh stop      SIGTERM, wait, then SIGKILL
#   ops/s3.sh status    say whether the server runs (exit 1 when it does not)
#   ops/s3.sh env       print S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY, S3_BUCKET, S3_REGION
#                       lines for the running server (eval "$(ops/s3.sh env)")
#
# Env: S3_PORT (7070), S3_ACCESS_KEY (rulevalidator), S3_SECRET_KEY (rulevalidator-secret),
#      S3_BUCKET (rulevalidator-reports), S3_REGION (us-east-1), VERSITYGW_VERSION (v1.8.0),
#      S3_START_TIMEOUT (30 s), RULEVALIDATOR_CACHE.
# Binary: $RV_CACHE/s3/bin/versitygw. Data: $RV_RUN/s3-data. Log: $RV_RUN/s3.log.
set -euo pipefail
OPS="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$OPS")"
. "$OPS/lib.sh"

VERSITYGW_VERSION="${VERSITYGW_VERSION:-v1.8.0}"
S3_PORT="${S3_PORT:-7070}"
S3_ACCESS_KEY="${S3_ACCESS_KEY:-rulevalidator}"
S3_SECRET_KEY="${S3_SECRET_KEY:-rulevalidator-secret}"
S3_BUCKET="${S3_BUCKET:-rulevalidator-reports}"
S3_REGION="${S3_REGION:-us-east-1}"
S3_START_TIMEOUT="${S3_START_TIMEOUT:-30}"

BIN_DIR="$RV_CACHE/s3/bin"
BIN="$BIN_DIR/versitygw"
DATA="$RV_RUN/s3-data"
SIDECAR="$RV_RUN/s3-meta"
PIDFILE="$RV_RUN/s3.pid"
LOGFILE="$RV_RUN/s3.log"
LOCKFILE="$RV_RUN/s3.lock"
# ENVFILE holds the S3_* lines of the running server, so that `env` answers for the server
# that runs rather than for whatever the caller's environment says.
ENVFILE="$RV_RUN/s3.env"
ENDPOINT="127.0.0.1:$S3_PORT"
HEALTH_PATH="/health"

# installed_version: the module version the cached binary was built from, if any.
installed_version() { module_version "$BIN" github.com/versity/versitygw; }

install() {
  command -v go >/dev/null || die "go not found; versitygw is built from source with the Go toolchain"
  if [ "$(installed_version)" = "$VERSITYGW_VERSION" ]; then
    log "versitygw $VERSITYGW_VERSION already installed: $BIN"
    return 0
  fi
  mkdir -p "$BIN_DIR"
  local started=$SECONDS buildlog="$RV_CACHE/s3/install.log"
  log "building versitygw $VERSITYGW_VERSION with $(go env GOVERSION) (once; a few minutes on 2 cores)"
  # Built outside the repository so that its go.mod plays no part; GOFLAGS from the
  # caller's environment (say -mod=vendor) would not apply to a module@version install.
  if ! (cd "$RV_CACHE/s3" && GOBIN="$BIN_DIR" GOFLAGS= go install \
      "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION") >"$buildlog" 2>&1; then
    tail -20 "$buildlog" >&2 || true
    die "installing versitygw $VERSITYGW_VERSION failed (full output: $buildlog); set VERSITYGW_VERSION to another release"
  fi
  [ "$(installed_version)" = "$VERSITYGW_VERSION" ] \
    || die "go install finished but $BIN does not report versitygw $VERSITYGW_VERSION"
  log "installed versitygw $VERSITYGW_VERSION in $((SECONDS - started)) s: $BIN"
}

# running: the pid file names a live versitygw (not some other process that reused the pid).
running() {
  pid_alive "$PIDFILE" && grep -qa 'versitygw' "/proc/$(cat "$PIDFILE")/cmdline" 2>/dev/null
}

# who_listens PORT: a short description of the process on 127.0.0.1:PORT, when ss can tell.
who_listens() {
  local who=""
  if command -v ss >/dev/null; then
    who=$(ss -ltnpH "sport = :$1" 2>/dev/null \
      | sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\1 (pid \2)/p' | head -1 || true)
  fi
  echo "${who:-an unknown process}"
}

env_lines() {
  printf 'S3_ENDPOINT=%s\nS3_ACCESS_KEY=%s\nS3_SECRET_KEY=%s\nS3_BUCKET=%s\nS3_REGION=%s\n' \
    "$ENDPOINT" "$S3_ACCESS_KEY" "$S3_SECRET_KEY" "$S3_BUCKET" "$S3_REGION"
}

# same_server: the running server is the one asked for (port and access key may differ
# between calls).
same_server() {
  local want have
  want=$(env_lines | grep -E '^S3_(ENDPOINT|ACCESS_KEY)=')
  have=$(grep -E '^S3_(ENDPOINT|ACCESS_KEY)=' "$ENVFILE" 2>/dev/null || true)
  [ "$want" = "$have" ] \
    || die "an S3 server from this script already runs as $(paste -sd' ' <<<"$have"); stop it first to start one as $(paste -sd' ' <<<"$want")"
}

# metadata_args: versitygw keeps object metadata in extended attributes; on a filesystem
# without user xattrs it keeps them in a sidecar directory instead.
metadata_args() {
  if command -v python3 >/dev/null \
      && ! python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.rulevalidator", b"1")' "$DATA" 2>/dev/null; then
    mkdir -p "$SIDECAR"
    log "no user xattrs on $DATA; keeping object metadata in $SIDECAR"
    echo "--sidecar"
    echo "$SIDECAR"
  fi
}

wait_ready() {
  local deadline=$((SECONDS + S3_START_TIMEOUT))
  until curl -fsS -o /dev/null --max-time 2 "http://$ENDPOINT$HEALTH_PATH" 2>/dev/null; do
    if ! running; then
      tail -20 "$LOGFILE" >&2 || true
      die "versitygw exited while starting (full log: $LOGFILE)"
    fi
    [ "$SECONDS" -lt "$deadline" ] || die "versitygw did not answer on $ENDPOINT within $S3_START_TIMEOUT s (log: $LOGFILE)"
    sleep 0.2
  done
}

# make_bucket: create the default bucket through the S3 API (idempotent).
make_bucket() {
  (cd "$ROOT" && env S3_ENDPOINT="$ENDPOINT" S3_ACCESS_KEY="$S3_ACCESS_KEY" S3_SECRET_KEY="$S3_SECRET_KEY" \
    S3_BUCKET="$S3_BUCKET" S3_REGION="$S3_REGION" go run ./internal/s3test/mkbucket) \
    || die "creating bucket $S3_BUCKET on $ENDPOINT failed (see the output above)"
}

start() {
  with_lock
  if running; then
    same_server
    log "already running on $ENDPOINT (pid $(cat "$PIDFILE"))"
    return 0
  fi
  if port_busy "$S3_PORT"; then
    die "port $S3_PORT on 127.0.0.1 is taken by $(who_listens "$S3_PORT"), not by this script's S3 server; stop it or set S3_PORT"
  fi
  install
  mkdir -p "$DATA"
  local meta started=$SECONDS
  mapfile -t meta < <(metadata_args)
  [ -f "$LOGFILE" ] && mv -f "$LOGFILE" "$LOGFILE.1"
  log "starting versitygw $VERSITYGW_VERSION on $ENDPOINT (data $DATA, log $LOGFILE)"
  # setsid: the server outlives the shell (or test) that started it; 9>&- leaves the lock
  # behind. Credentials go through the environment, not the command line, so ps can't show them.
  ROOT_ACCESS_KEY="$S3_ACCESS_KEY" ROOT_SECRET_KEY="$S3_SECRET_KEY" \
    nohup setsid "$BIN" --port "$ENDPOINT" --region "$S3_REGION" --health "$HEALTH_PATH" \
    posix "${meta[@]}" "$DATA" </dev/null >"$LOGFILE" 2>&1 9>&- &
  echo $! >"$PIDFILE"
  env_lines >"$ENVFILE"
  chmod 600 "$ENVFILE"
  wait_ready
  make_bucket
  log "ready in $((SECONDS - started)) s: $ENDPOINT, bucket $S3_BUCKET"
}

stop() {
  with_lock
  if ! running; then
    rm -f "$PIDFILE" "$ENVFILE"
    log "not running"
    return 0
  fi
  stop_pid "$PIDFILE" "versitygw"
  rm -f "$ENVFILE"
}

status() {
  if running && curl -fsS -o /dev/null --max-time 2 "http://$(endpoint_of_running)$HEALTH_PATH" 2>/dev/null; then
    log "running on $(endpoint_of_running) (pid $(cat "$PIDFILE"), data $DATA, log $LOGFILE)"
  else
    log "not running"
    return 1
  fi
}

endpoint_of_running() {
  sed -n 's/^S3_ENDPOINT=//p' "$ENVFILE" 2>/dev/null | grep . || echo "$ENDPOINT"
}

print_env() {
  if running && [ -s "$ENVFILE" ]; then cat "$ENVFILE"; else env_lines; fi
}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) print_env ;;
  *) usage ;;
esac
