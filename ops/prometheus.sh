#!/usr/bin/env bash
# Local Prometheus on 127.0.0.1, scraping a rulevalidator started on this machine
# (`rulevalidator serve`, ops listener 127.0.0.1:9464) and evaluating
# ops/prometheus/alerts.yml. Debian's prometheus and promtool:
# `bash ops/tools.sh install prometheus`.
#
#   ops/prometheus.sh start    render the config, check it, start, wait until ready
#   ops/prometheus.sh stop     SIGTERM, wait, then SIGKILL
#   ops/prometheus.sh status   say whether it runs (exit 1 when it does not)
#   ops/prometheus.sh url      print the base URL
#   ops/prometheus.sh render   write the config for the local stack and print its path
#
# Env: PROM_PORT (9090), RULEVALIDATOR_OPS_ADDR (127.0.0.1:9464, the service's ops listener),
#      PROM_RETENTION (7d), PROM_START_TIMEOUT (30 s), RULEVALIDATOR_CACHE.
# Config: $RV_RUN/prometheus.yml. Data: $RV_RUN/prometheus-data. Log: $RV_RUN/prometheus.log.
set -euo pipefail
OPS="$(cd "$(dirname "$0")" && pwd)"
. "$OPS/lib.sh"

PROM_PORT="${PROM_PORT:-9090}"
OPS_ADDR="${RULEVALIDATOR_OPS_ADDR:-127.0.0.1:9464}"
PROM_RETENTION="${PROM_RETENTION:-7d}"
PROM_START_TIMEOUT="${PROM_START_TIMEOUT:-30}"

SOURCE="$OPS/prometheus/prometheus.yml"
RULES="$OPS/prometheus/alerts.yml"
# The target prometheus.yml names for the docker-compose stack; render swaps it.
COMPOSE_TARGET="rulevalidator:9464"
CONF="$RV_RUN/prometheus.yml"
DATA="$RV_RUN/prometheus-data"
PIDFILE="$RV_RUN/prometheus.pid"
PORTFILE="$RV_RUN/prometheus.port"
LOGFILE="$RV_RUN/prometheus.log"
LOCKFILE="$RV_RUN/prometheus.lock"

# running: the pid file names a live prometheus (not some other process that reused the pid).
running() {
  pid_alive "$PIDFILE" && grep -qa 'prometheus' "/proc/$(cat "$PIDFILE")/cmdline" 2>/dev/null
}

running_port() { cat "$PORTFILE" 2>/dev/null || echo "$PROM_PORT"; }

# scrape_target: the ops address as a scrape target; a listener on every interface
# (":9464", "0.0.0.0:9464") is scraped on loopback.
scrape_target() {
  local host=${OPS_ADDR%:*} port=${OPS_ADDR##*:}
  [[ "$port" =~ ^[0-9]+$ ]] || die "RULEVALIDATOR_OPS_ADDR=$OPS_ADDR: expected HOST:PORT"
  case "$host" in "" | 0.0.0.0 | "[::]") host=127.0.0.1 ;; esac
  echo "$host:$port"
}

render() {
  local target
  target=$(scrape_target)
  grep -qF -- "- $COMPOSE_TARGET" "$SOURCE" || die "$SOURCE no longer names the target $COMPOSE_TARGET; update $0"
  grep -qxF -- "  - alerts.yml" "$SOURCE" || die "$SOURCE no longer loads alerts.yml as '  - alerts.yml'; update $0"
  sed -e "s|- $COMPOSE_TARGET\$|- $target|" -e "s|^  - alerts.yml\$|  - $RULES|" "$SOURCE" >"$CONF.tmp"
  mv "$CONF.tmp" "$CONF"
  if command -v promtool >/dev/null; then
    promtool check config "$CONF" >"$RV_RUN/prometheus-check.log" 2>&1 \
      || { cat "$RV_RUN/prometheus-check.log" >&2; die "promtool rejects the rendered config $CONF"; }
  fi
  echo "$CONF"
}

wait_ready() {
  local deadline=$((SECONDS + PROM_START_TIMEOUT))
  until curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$PROM_PORT/-/ready" 2>/dev/null; do
    if ! running; then
      tail -20 "$LOGFILE" >&2 || true
      die "prometheus exited while starting (full log: $LOGFILE)"
    fi
    [ "$SECONDS" -lt "$deadline" ] || die "prometheus did not become ready within $PROM_START_TIMEOUT s (log: $LOGFILE)"
    sleep 0.3
  done
}

start() {
  with_lock
  if running; then
    [ "$(running_port)" = "$PROM_PORT" ] \
      || die "a prometheus from this script already runs on port $(running_port); stop it first to start one on $PROM_PORT"
    log "already running on 127.0.0.1:$PROM_PORT (pid $(cat "$PIDFILE"))"
    return 0
  fi
  command -v prometheus >/dev/null || die "prometheus not found; install it with: bash ops/tools.sh install prometheus"
  port_busy "$PROM_PORT" && die "port $PROM_PORT on 127.0.0.1 is taken by another process; stop it or set PROM_PORT"
  render >/dev/null
  mkdir -p "$DATA"
  [ -f "$LOGFILE" ] && mv -f "$LOGFILE" "$LOGFILE.1"
  log "starting prometheus on 127.0.0.1:$PROM_PORT, scraping $(scrape_target) (config $CONF, data $DATA, log $LOGFILE)"
  local started=$SECONDS
  # setsid: the server outlives the shell (or test) that started it; 9>&- leaves the lock behind.
  # exemplar-storage keeps the histograms' exemplars (trace ids), which the OpenMetrics scrape brings.
  nohup setsid prometheus --config.file="$CONF" --storage.tsdb.path="$DATA" \
    --storage.tsdb.retention.time="$PROM_RETENTION" --web.listen-address="127.0.0.1:$PROM_PORT" \
    --enable-feature=exemplar-storage \
    </dev/null >"$LOGFILE" 2>&1 9>&- &
  echo $! >"$PIDFILE"
  echo "$PROM_PORT" >"$PORTFILE"
  wait_ready
  log "ready in $((SECONDS - started)) s: $(url)"
}

stop() {
  with_lock
  stop_pid "$PIDFILE" "prometheus"
  rm -f "$PORTFILE"
}

status() {
  if running && curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$(running_port)/-/ready" 2>/dev/null; then
    log "running on 127.0.0.1:$(running_port) (pid $(cat "$PIDFILE"), config $CONF, log $LOGFILE)"
  else
    log "not running"
    return 1
  fi
}

url() { echo "http://127.0.0.1:$(running_port)"; }

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  url) url ;;
  render) render ;;
  *) usage ;;
esac
