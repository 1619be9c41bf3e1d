#!/usr/bin/env bash
# Local trace viewer: Jaeger (Go, Apache-2.0), the v2 binary (an OpenTelemetry Collector
# with Jaeger's storage and UI), on 127.0.0.1 with traces kept in memory, built once with
# `go install` and cached. rulevalidator sends it its spans over OTLP/HTTP when started
# with OTEL_EXPORTER_OTLP_ENDPOINT=$(ops/jaeger.sh otlp).
#
#   ops/jaeger.sh install   build jaeger into the cache (once per version)
#   ops/jaeger.sh start     install, render the config, start, wait until it answers
#   ops/jaeger.sh stop      SIGTERM, wait, then SIGKILL
#   ops/jaeger.sh status    say whether it runs (exit 1 when it does not)
#   ops/jaeger.sh url       print the UI's base URL (a trace: URL/trace/<trace id>)
#   ops/jaeger.sh otlp      print the OTLP/HTTP base URL (OTEL_EXPORTER_OTLP_ENDPOINT)
#   ops/jaeger.sh render    write the config and print its path
#
# Env: JAEGER_UI_PORT (16686), JAEGER_OTLP_PORT (4318, OTLP/HTTP), JAEGER_GRPC_PORT (16685,
#      the query API), JAEGER_MAX_TRACES (20000, then the oldest go), JAEGER_VERSION (v1.75.0),
#      JAEGER_START_TIMEOUT (30 s), RULEVALIDATOR_CACHE.
# Binary: $RV_CACHE/jaeger/bin/jaeger. Config: $RV_RUN/jaeger.yaml. Log: $RV_RUN/jaeger.log.
set -euo pipefail
OPS="$(cd "$(dirname "$0")" && pwd)"
. "$OPS/lib.sh"

JAEGER_VERSION="${JAEGER_VERSION:-v1.75.0}"
JAEGER_UI_PORT="${JAEGER_UI_PORT:-16686}"
JAEGER_OTLP_PORT="${JAEGER_OTLP_PORT:-4318}"
JAEGER_GRPC_PORT="${JAEGER_GRPC_PORT:-16685}"
JAEGER_MAX_TRACES="${JAEGER_MAX_TRACES:-20000}"
JAEGER_START_TIMEOUT="${JAEGER_START_TIMEOUT:-30}"

BIN_DIR="$RV_CACHE/jaeger/bin"
BIN="$BIN_DIR/jaeger"
CONF="$RV_RUN/jaeger.yaml"
PIDFILE="$RV_RUN/jaeger.pid"
# PORTSFILE holds the UI and OTLP ports of the running server, so that url and otlp answer
# for the server that runs.
PORTSFILE="$RV_RUN/jaeger.ports"
LOGFILE="$RV_RUN/jaeger.log"
LOCKFILE="$RV_RUN/jaeger.lock"

# installed_version: the jaeger module version the cached binary was built from, if any.
installed_version() { module_version "$BIN" github.com/jaegertracing/jaeger; }

# install builds cmd/jaeger as a tool of a module of its own under the cache: `go install
# module@version` refuses jaeger, whose go.mod replaces a dependency; the build module
# repeats that replacement, so that the binary is built as Jaeger's own build makes it.
# The binary serves Jaeger's API and a placeholder page at its UI's address: the web UI's
# assets are built with npm from another repository and are not part of the Go module.
install() {
  command -v go >/dev/null || die "go not found; jaeger is built from source with the Go toolchain"
  if [ "$(installed_version)" = "$JAEGER_VERSION" ]; then
    log "jaeger $JAEGER_VERSION already installed: $BIN"
    return 0
  fi
  local started=$SECONDS build="$RV_CACHE/jaeger/build" buildlog="$RV_CACHE/jaeger/install.log"
  rm -rf "$build"
  mkdir -p "$BIN_DIR" "$build"
  printf '%s\n' "module rulevalidator.local/jaeger-build" "" "go 1.25" "" \
    "replace github.com/Shopify/sarama => github.com/Shopify/sarama v1.33.0" >"$build/go.mod"
  log "building jaeger $JAEGER_VERSION with $(go env GOVERSION) (once; a large build: ten minutes or more on 2 cores)"
  # At low priority: the build is long and the machine is shared. GOFLAGS from the caller's
  # environment (say -mod=vendor) would not apply to this module.
  if ! (cd "$build" && export GOFLAGS= && go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION" \
      && GOBIN="$BIN_DIR" nice -n 10 go install github.com/jaegertracing/jaeger/cmd/jaeger) >"$buildlog" 2>&1; then
    tail -20 "$buildlog" >&2 || true
    die "installing jaeger $JAEGER_VERSION failed (full output: $buildlog)"
  fi
  [ "$(installed_version)" = "$JAEGER_VERSION" ] \
    || die "go install finished but $BIN does not report jaeger $JAEGER_VERSION"
  log "installed jaeger $JAEGER_VERSION in $((SECONDS - started)) s: $BIN"
}

# render: the all-in-one setup cut down to what the local stack uses: OTLP/HTTP in, memory
# storage, the UI; every listener on loopback, and no other port (the built-in all-in-one
# config also opens Jaeger's, Zipkin's, sampling, metrics and debug ports on all of them).
render() {
  local port
  for port in "$JAEGER_UI_PORT" "$JAEGER_OTLP_PORT" "$JAEGER_GRPC_PORT" "$JAEGER_MAX_TRACES"; do
    [[ "$port" =~ ^[0-9]+$ ]] || die "JAEGER_UI_PORT, JAEGER_OTLP_PORT, JAEGER_GRPC_PORT and JAEGER_MAX_TRACES take numbers; got $port"
  done
  cat >"$CONF.tmp" <<EOF
# Rendered by ops/jaeger.sh; edits are lost at the next start.
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info

extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: $JAEGER_MAX_TRACES
  jaeger_query:
    storage:
      traces: memstore
    # On by default, it would send Jaeger's own spans to localhost:4317.
    enable_tracing: false
    http:
      endpoint: 127.0.0.1:$JAEGER_UI_PORT
    grpc:
      endpoint: 127.0.0.1:$JAEGER_GRPC_PORT

receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$JAEGER_OTLP_PORT

processors:
  batch:

exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
EOF
  mv "$CONF.tmp" "$CONF"
  echo "$CONF"
}

# running: the pid file names a live jaeger (not some other process that reused the pid).
running() {
  pid_alive "$PIDFILE" && grep -qa 'jaeger' "/proc/$(cat "$PIDFILE")/cmdline" 2>/dev/null
}

running_port() { # running_port ui|otlp
  sed -n "s/^$1=//p" "$PORTSFILE" 2>/dev/null | grep . || case $1 in ui) echo "$JAEGER_UI_PORT" ;; otlp) echo "$JAEGER_OTLP_PORT" ;; esac
}

url() { echo "http://127.0.0.1:$(running_port ui)"; }
otlp() { echo "http://127.0.0.1:$(running_port otlp)"; }

# ready: the UI answers and the OTLP receiver listens.
ready() {
  curl -fsS -o /dev/null --max-time 2 "$(url)/" 2>/dev/null && port_busy "$(running_port otlp)"
}

wait_ready() {
  local deadline=$((SECONDS + JAEGER_START_TIMEOUT))
  until ready; do
    if ! running; then
      tail -20 "$LOGFILE" >&2 || true
      die "jaeger exited while starting (full log: $LOGFILE)"
    fi
    [ "$SECONDS" -lt "$deadline" ] || die "jaeger did not answer within $JAEGER_START_TIMEOUT s (log: $LOGFILE)"
    sleep 0.3
  done
}

start() {
  with_lock
  if running; then
    [ "$(running_port ui)" = "$JAEGER_UI_PORT" ] && [ "$(running_port otlp)" = "$JAEGER_OTLP_PORT" ] \
      || die "a jaeger from this script already runs (UI port $(running_port ui), OTLP port $(running_port otlp)); stop it first to start one on $JAEGER_UI_PORT and $JAEGER_OTLP_PORT"
    log "already running: UI $(url), OTLP/HTTP $(otlp) (pid $(cat "$PIDFILE"))"
    return 0
  fi
  local port
  for port in "$JAEGER_UI_PORT" "$JAEGER_OTLP_PORT" "$JAEGER_GRPC_PORT"; do
    port_busy "$port" && die "port $port on 127.0.0.1 is taken by another process; stop it or set JAEGER_UI_PORT, JAEGER_OTLP_PORT, JAEGER_GRPC_PORT"
  done
  install
  render >/dev/null
  [ -f "$LOGFILE" ] && mv -f "$LOGFILE" "$LOGFILE.1"
  log "starting jaeger $JAEGER_VERSION: UI 127.0.0.1:$JAEGER_UI_PORT, OTLP/HTTP 127.0.0.1:$JAEGER_OTLP_PORT (config $CONF, log $LOGFILE)"
  local started=$SECONDS
  # setsid: the server outlives the shell (or test) that started it; 9>&- leaves the lock behind.
  nohup setsid "$BIN" --config "$CONF" </dev/null >"$LOGFILE" 2>&1 9>&- &
  echo $! >"$PIDFILE"
  printf 'ui=%s\notlp=%s\n' "$JAEGER_UI_PORT" "$JAEGER_OTLP_PORT" >"$PORTSFILE"
  wait_ready
  log "ready in $((SECONDS - started)) s: UI $(url), OTLP/HTTP $(otlp)"
}

stop() {
  with_lock
  stop_pid "$PIDFILE" "jaeger"
  rm -f "$PORTSFILE"
}

status() {
  if running && ready; then
    log "running: UI $(url), OTLP/HTTP $(otlp) (pid $(cat "$PIDFILE"), log $LOGFILE)"
  else
    log "not running"
    return 1
  fi
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
  url) url ;;
  otlp) otlp ;;
  render) render ;;
  *) usage ;;
esac
