#!/usr/bin/env bash
# Local Apache Kafka (KRaft, one node acting as broker and controller) on 127.0.0.1, run from
# jars fetched once from Maven Central. No Docker, no downloads besides Maven Central.
#
#   ops/kafka.sh start       fetch (first time), format storage (first time), start, wait until ready
#   ops/kafka.sh stop        SIGTERM, wait, then SIGKILL
#   ops/kafka.sh restart     stop then start, keeping the data
#   ops/kafka.sh reset       stop, delete the data, start fresh
#   ops/kafka.sh status      say whether the broker runs (exit 1 when it does not)
#   ops/kafka.sh bootstrap   print the bootstrap address
#   ops/kafka.sh topics      create the project's topics (idempotent)
#   ops/kafka.sh topic NAME PARTITIONS [key=value...]   create one topic with topic configs
#   ops/kafka.sh delete-topics NAME...   delete topics (those that exist)
#
# Env: KAFKA_PORT (9092), KAFKA_CONTROLLER_PORT (9093), KAFKA_VERSION (4.4.0),
#      KAFKA_HEAP_OPTS (-Xms256m -Xmx512m), KAFKA_START_TIMEOUT (180 s), KAFKA_STOP_TIMEOUT (60 s),
#      RULEVALIDATOR_TOPIC_{REQUESTS,VERDICTS,SUMMARIES,DEADLETTER,CALLBACKS,REVIEWS,RULESETS,REPLAYS}, RULEVALIDATOR_CACHE.
# Jars: $RV_CACHE/kafka/<version>/libs (Maven repository: $RV_CACHE/m2).
# Data: $RV_RUN/kafka-data. Log: $RV_RUN/kafka.log.
set -euo pipefail
OPS="$(cd "$(dirname "$0")" && pwd)"
. "$OPS/lib.sh"

KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-180}"
KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-60}"

TOPIC_REQUESTS="${RULEVALIDATOR_TOPIC_REQUESTS:-rulevalidator.requests}"
TOPIC_VERDICTS="${RULEVALIDATOR_TOPIC_VERDICTS:-rulevalidator.verdicts}"
TOPIC_SUMMARIES="${RULEVALIDATOR_TOPIC_SUMMARIES:-rulevalidator.summaries}"
TOPIC_DEADLETTER="${RULEVALIDATOR_TOPIC_DEADLETTER:-rulevalidator.deadletter}"
TOPIC_CALLBACKS="${RULEVALIDATOR_TOPIC_CALLBACKS:-rulevalidator.callbacks}"
TOPIC_REVIEWS="${RULEVALIDATOR_TOPIC_REVIEWS:-rulevalidator.reviews}"
TOPIC_RULESETS="${RULEVALIDATOR_TOPIC_RULESETS:-rulevalidator.rulesets}"
TOPIC_REPLAYS="${RULEVALIDATOR_TOPIC_REPLAYS:-rulevalidator.replays}"

KAFKA_HOME="$RV_CACHE/kafka/$KAFKA_VERSION"
LIBS="$KAFKA_HOME/libs"
M2="$RV_CACHE/m2"
DATA="$RV_RUN/kafka-data"
CONF="$RV_RUN/kafka-server.properties"
PIDFILE="$RV_RUN/kafka.pid"
LOGFILE="$RV_RUN/kafka.log"
LOCKFILE="$RV_RUN/kafka.lock"
PORTFILE="$RV_RUN/kafka.port"
BOOTSTRAP="127.0.0.1:$KAFKA_PORT"

# Tools are short-lived JVMs: skip the optimising compiler and keep their logs quiet.
TOOL_JAVA_OPTS=(-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
  -Dlog4j2.configurationFile="$OPS/kafka/log4j2.properties" -Drulevalidator.kafka.loglevel=WARN)

require_java() {
  command -v java >/dev/null || die "java not found; Kafka $KAFKA_VERSION needs Java 17 or newer (Debian: apt-get install openjdk-17-jre-headless)"
  local major
  major=$(java -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ {print $2}')
  major=${major%%.*}
  [ "${major:-0}" -ge 17 ] || die "java $major found; Kafka $KAFKA_VERSION needs Java 17 or newer"
}

# fetch: resolve the broker and CLI jars with all runtime dependencies into $LIBS, once.
fetch() {
  [ -f "$KAFKA_HOME/.complete" ] && return 0
  command -v mvn >/dev/null || die "mvn not found; it resolves the Kafka jars from Maven Central (Debian: apt-get install maven)"
  local tmp="$LIBS.tmp" mvnlog="$KAFKA_HOME/mvn.log" started=$SECONDS
  mkdir -p "$KAFKA_HOME" "$M2"
  rm -rf "$tmp"
  log "fetching Apache Kafka $KAFKA_VERSION and its dependencies from Maven Central (once; cached in $KAFKA_HOME)"
  if ! mvn -B -f "$OPS/kafka/pom.xml" -Dmaven.repo.local="$M2" -Dkafka.version="$KAFKA_VERSION" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" 2>&1 \
      | tee "$mvnlog" | show_download_progress; then
    local why
    why=$(grep -E 'Could not (find|resolve|transfer)|Failed to (read artifact|collect|execute)|Non-resolvable|Unknown host|Connection' "$mvnlog" \
      | sed -e 's/^\[ERROR\] *//' | head -5 || true)
    die "fetching Kafka $KAFKA_VERSION from Maven Central failed:
${why:-(no reason given by mvn)}
full Maven log: $mvnlog"
  fi
  rm -rf "$LIBS"
  mv "$tmp" "$LIBS"
  touch "$KAFKA_HOME/.complete"
  log "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars ($(du -sh "$LIBS" | cut -f1)) in $((SECONDS - started)) s"
}

# show_download_progress: turn Maven's transfer log into one line per downloaded jar.
show_download_progress() {
  local n=0 line name size
  while IFS= read -r line; do
    line=${line#\[INFO\] }
    case "$line" in
      Downloaded\ from*.jar\ \(*)
        n=$((n + 1))
        name=${line%% (*}
        size=${line##* (}
        log "  [$n] ${name##*/} (${size%% at *})"
        ;;
    esac
  done
}

# running: the pid file names a live broker (not some other process that reused the pid).
running() {
  pid_alive "$PIDFILE" && grep -qa 'kafka.Kafka' "/proc/$(cat "$PIDFILE")/cmdline" 2>/dev/null
}

# running_bootstrap: the address the running broker was started with.
running_bootstrap() {
  cat "$PORTFILE" 2>/dev/null || echo "$BOOTSTRAP"
}

# same_address: the running broker is the one asked for (KAFKA_PORT may differ between calls).
same_address() {
  local current
  current=$(running_bootstrap)
  [ "$current" = "$BOOTSTRAP" ] \
    || die "a broker from this script already runs on $current; stop it first to start one on $BOOTSTRAP"
}

# ensure_running: start the broker unless it already runs (quietly).
ensure_running() {
  if running; then same_address; else start >/dev/null; fi
}

# who_listens PORT: a short description of the process on 127.0.0.1:PORT, when ss can tell.
who_listens() {
  local who=""
  if command -v ss >/dev/null; then
    # users:(("python3",pid=123,fd=3)) -> python3 (pid 123)
    who=$(ss -ltnpH "sport = :$1" 2>/dev/null \
      | sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\1 (pid \2)/p' | head -1 || true)
  fi
  echo "${who:-an unknown process}"
}

render_config() {
  sed -e "s|@PORT@|$KAFKA_PORT|g" -e "s|@CONTROLLER_PORT@|$KAFKA_CONTROLLER_PORT|g" -e "s|@DATA_DIR@|$DATA|g" \
    "$OPS/kafka/server.properties.template" >"$CONF"
}

# random_cluster_id: 16 random bytes in Kafka's Uuid text form (URL-safe base64, no padding).
# Kafka itself never hands out ids starting with '-', as they read like CLI flags.
random_cluster_id() {
  local id
  while :; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    case "$id" in -*) ;; *) echo "$id"; return ;; esac
  done
}

format_storage() {
  [ -f "$DATA/meta.properties" ] && return 0
  local id
  id=$(random_cluster_id)
  mkdir -p "$DATA"
  log "formatting KRaft storage in $DATA (cluster id $id)"
  java "${TOOL_JAVA_OPTS[@]}" -cp "$LIBS/*" kafka.tools.StorageTool format \
    --cluster-id "$id" --config "$CONF" >/dev/null \
    || die "formatting the KRaft storage in $DATA failed (see the output above)"
}

# tool CLASS ARGS...: run one of Kafka's own CLI classes against the local broker.
tool() {
  local class=$1
  shift
  java "${TOOL_JAVA_OPTS[@]}" -cp "$LIBS/*" "$class" --bootstrap-server "$BOOTSTRAP" \
    --command-config "$OPS/kafka/tools.properties" "$@"
}

wait_ready() {
  local deadline=$((SECONDS + KAFKA_START_TIMEOUT))
  until port_busy "$KAFKA_PORT" && grep -q 'Kafka Server started' "$LOGFILE" 2>/dev/null; do
    # Alive is enough here: until nohup and setsid have exec'd java, the pid's command line
    # is theirs, and running (which checks for kafka.Kafka) would call a starting broker dead.
    if ! pid_alive "$PIDFILE"; then
      tail -30 "$LOGFILE" >&2 || true
      die "the broker exited while starting (full log: $LOGFILE)"
    fi
    [ "$SECONDS" -lt "$deadline" ] || die "the broker did not come up within $KAFKA_START_TIMEOUT s (log: $LOGFILE)"
    sleep 0.5
  done
  # The port answering is not enough: ask for metadata the way a client would.
  tool org.apache.kafka.tools.TopicCommand --list >/dev/null \
    || die "the broker listens on $BOOTSTRAP but does not answer a metadata request (log: $LOGFILE)"
}

start() {
  with_lock
  if running; then
    same_address
    log "already running on $BOOTSTRAP (pid $(cat "$PIDFILE"))"
    echo "$BOOTSTRAP"
    return 0
  fi
  local port
  for port in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
    if port_busy "$port"; then
      die "port $port on 127.0.0.1 is taken by $(who_listens "$port"), not by this script's broker; stop it or set KAFKA_PORT / KAFKA_CONTROLLER_PORT"
    fi
  done
  require_java
  fetch
  render_config
  format_storage
  [ -f "$LOGFILE" ] && mv -f "$LOGFILE" "$LOGFILE.1"
  log "starting Kafka $KAFKA_VERSION on $BOOTSTRAP (controller 127.0.0.1:$KAFKA_CONTROLLER_PORT, data $DATA, log $LOGFILE)"
  local started=$SECONDS
  # setsid: the broker outlives the shell (or test) that started it; 9>&- leaves the lock behind.
  # shellcheck disable=SC2086 # KAFKA_HEAP_OPTS is a list of JVM flags
  nohup setsid java $KAFKA_HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$OPS/kafka/log4j2.properties" -Drulevalidator.kafka.loglevel=INFO \
    -cp "$LIBS/*" kafka.Kafka "$CONF" </dev/null >"$LOGFILE" 2>&1 9>&- &
  echo $! >"$PIDFILE"
  echo "$BOOTSTRAP" >"$PORTFILE"
  wait_ready
  log "ready in $((SECONDS - started)) s: bootstrap $BOOTSTRAP"
  echo "$BOOTSTRAP"
}

stop() {
  with_lock
  if ! running; then
    rm -f "$PIDFILE" "$PORTFILE"
    log "not running"
    return 0
  fi
  local pid deadline
  pid=$(cat "$PIDFILE")
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + KAFKA_STOP_TIMEOUT))
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.3; done
  if kill -0 "$pid" 2>/dev/null; then
    log "no clean shutdown within $KAFKA_STOP_TIMEOUT s; killing pid $pid"
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$PIDFILE" "$PORTFILE"
  log "stopped"
}

status() {
  if running && port_busy "$(running_bootstrap | cut -d: -f2)"; then
    log "running on $(running_bootstrap) (pid $(cat "$PIDFILE"), data $DATA, log $LOGFILE)"
  else
    log "not running"
    return 1
  fi
}

# create_topic NAME PARTITIONS [key=value...]: create unless it already exists.
create_topic() {
  local name=$1 partitions=$2 kv
  shift 2
  [[ "$partitions" =~ ^[1-9][0-9]*$ ]] || die "topic $name: partitions must be a positive integer, got '$partitions'"
  local args=(--create --if-not-exists --topic "$name" --partitions "$partitions" --replication-factor 1)
  for kv in "$@"; do
    [[ "$kv" == ?*=* ]] || die "topic $name: config must be key=value, got '$kv'"
    args+=(--config "$kv")
  done
  tool org.apache.kafka.tools.TopicCommand "${args[@]}" >/dev/null \
    || die "creating topic $name failed (see the output above)"
  log "topic $name: $partitions partitions${*:+, $*}"
}

topics() {
  ensure_running
  local existing spec name
  existing=$(tool org.apache.kafka.tools.TopicCommand --list) || die "listing topics on $BOOTSTRAP failed"
  # A callback carries every verdict of its request: its topic takes records of up to 8 MiB
  # (a larger one is sent without the verdicts, see docs/http-api.md). The replays topic
  # records each dead letter `rulevalidator deadletter replay` sent, one record a key.
  for spec in "$TOPIC_REQUESTS 6" "$TOPIC_VERDICTS 6" "$TOPIC_SUMMARIES 6" "$TOPIC_DEADLETTER 3" \
    "$TOPIC_CALLBACKS 6 max.message.bytes=8388608" "$TOPIC_REVIEWS 6" "$TOPIC_RULESETS 3 cleanup.policy=compact" \
    "$TOPIC_REPLAYS 3 cleanup.policy=compact"; do
    name=${spec%% *}
    if grep -qxF "$name" <<<"$existing"; then
      log "topic $name: exists"
      continue
    fi
    # shellcheck disable=SC2086 # the spec's words are NAME PARTITIONS [key=value...]
    create_topic $spec
  done
}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  start) start ;;
  stop) stop ;;
  restart) stop && start ;;
  reset)
    stop
    log "deleting $DATA"
    rm -rf "$DATA"
    start
    ;;
  status) status ;;
  bootstrap) if running; then running_bootstrap; else echo "$BOOTSTRAP"; fi ;;
  topics) topics ;;
  topic)
    [ $# -ge 2 ] || die "usage: ops/kafka.sh topic NAME PARTITIONS [key=value...]"
    ensure_running
    create_topic "$@"
    ;;
  delete-topics)
    [ $# -ge 1 ] || die "usage: ops/kafka.sh delete-topics NAME..."
    ensure_running
    for name in "$@"; do
      tool org.apache.kafka.tools.TopicCommand --delete --if-exists --topic "$name" >/dev/null ||
        die "deleting topic $name failed (see the output above)"
      log "topic $name: deleted"
    done
    ;;
  *) usage ;;
esac
