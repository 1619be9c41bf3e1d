#!/usr/bin/env bash
# Memory benchmark: `rulevalidator serve --concurrency 64` judging requests that
# each carry a ~1 MB document, against the local broker (ops/kafka.sh) and a
# scripted model (bench/membench) that answers well-formed verdicts after a
# delay, so that the requests really are in flight together. The serve
# process's VmRSS and VmHWM are sampled from /proc every 250 ms:
#
#   1. flowing: from start until half the requests are judged (peak, and the
#      median over the second half of that time: steady);
#   2. the broker stopped for MEMBENCH_OUTAGE seconds with serve running
#      (RSS at its start and end, and its peak: flat means no growth);
#   3. the broker restarted: every request must get its summary.
#
# It prints a table and exits 1 when a request is lost (no completed summary)
# or when the peak RSS (VmHWM over the whole run) passes MEMBENCH_MAX_RSS_MB.
# The broker keeps running; the run's topics are deleted at the end.
#
#   ops/membench.sh [serve flags...]      e.g. ops/membench.sh --max-bytes-in-flight 33554432
#
# Env: MEMBENCH_MAX_RSS_MB (256: the budget; 0 disables the check), MEMBENCH_REQUESTS (256), MEMBENCH_DOC_BYTES (1000000),
# MEMBENCH_CONCURRENCY (64), MEMBENCH_DELAY (4s: each model answer),
# MEMBENCH_OUTAGE (60 s), MEMBENCH_CONTEXT_TOKENS (400000: the whole
# document in one call; 8192 plans several calls on excerpts),
# MEMBENCH_OPS_ADDR (127.0.0.1:9465), MEMBENCH_BIN (a rulevalidator binary to
# measure instead of building this checkout's, e.g. an earlier commit's), LLM_PORT (8081: the scripted model;
# nothing else may listen there), and ops/kafka.sh's KAFKA_PORT,
# KAFKA_CONTROLLER_PORT, RULEVALIDATOR_RUN.
set -euo pipefail
cd "$(dirname "$0")/.."
. ops/lib.sh

REQUESTS="${MEMBENCH_REQUESTS:-256}"
DOC_BYTES="${MEMBENCH_DOC_BYTES:-1000000}"
CONCURRENCY="${MEMBENCH_CONCURRENCY:-64}"
DELAY="${MEMBENCH_DELAY:-4s}"
OUTAGE="${MEMBENCH_OUTAGE:-60}"
CONTEXT_TOKENS="${MEMBENCH_CONTEXT_TOKENS:-400000}"
OPS_ADDR="${MEMBENCH_OPS_ADDR:-127.0.0.1:9465}"
MAX_RSS_MB="${MEMBENCH_MAX_RSS_MB:-256}"
MODEL_ADDR="127.0.0.1:${LLM_PORT:-8081}"
BATCH=32 # requests produced at once: the producer holds a batch in memory

WORK="$RV_RUN/membench"
BIN="$WORK/rulevalidator"
HELPER="$WORK/membench"
RUN_ID="membench-$(date +%s)"
mkdir -p "$WORK"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

for addr in "$MODEL_ADDR" "$OPS_ADDR"; do
  port_busy "${addr##*:}" && die "port ${addr##*:} is taken; set LLM_PORT / MEMBENCH_OPS_ADDR"
done

if [ -n "${MEMBENCH_BIN:-}" ]; then
  BIN=$MEMBENCH_BIN
else
  log "building rulevalidator"
  go build -o "$BIN" ./cmd/rulevalidator
fi
go build -o "$HELPER" ./bench/membench

bootstrap=$(bash ops/kafka.sh start | tail -1)
topic() { echo "$RUN_ID.$1"; }
for t in requests verdicts summaries deadletter; do
  parts=6
  [ "$t" = deadletter ] && parts=3
  # Room for a 1 MB document and its envelope (Kafka's default is 1 MB).
  bash ops/kafka.sh topic "$(topic $t)" "$parts" max.message.bytes=4194304
done

mkdir -p "$WORK/rulesets"
cp examples/contract-review/ruleset.yaml "$WORK/rulesets/"
"$HELPER" request -base examples/contract-review/request.json -bytes "$DOC_BYTES" >"$WORK/request.json"
log "producing $REQUESTS requests of $(stat -c %s "$WORK/request.json") bytes to $(topic requests)"
for ((sent = 0; sent < REQUESTS; sent += BATCH)); do
  "$BIN" produce --kafka-brokers "$bootstrap" --requests-topic "$(topic requests)" --file "$WORK/request.json" \
    --request-id "$RUN_ID-$sent" --count "$((REQUESTS - sent < BATCH ? REQUESTS - sent : BATCH))" >/dev/null
done

"$HELPER" model -addr "$MODEL_ADDR" -delay "$DELAY" 2>"$WORK/model.log" &
pids+=($!)
wait_http "http://$MODEL_ADDR/v1/models" 30 || die "the scripted model did not start (log: $WORK/model.log)"

# Every request carries the same document: without --verdict-cache=false the verdict cache
# would answer all but the first, and the requests would not wait for the model together.
log "starting serve --concurrency $CONCURRENCY${*:+ $*} (log: $WORK/serve.log)"
start_ms=$(date +%s%3N)
"$BIN" serve --kafka-brokers "$bootstrap" --group-id "$RUN_ID" \
  --requests-topic "$(topic requests)" --verdicts-topic "$(topic verdicts)" \
  --summaries-topic "$(topic summaries)" --deadletter-topic "$(topic deadletter)" \
  --rulesets-dir "$WORK/rulesets" --rulesets-topic "" \
  --llm-base-url "http://$MODEL_ADDR/v1" --model fake-model --llm-instructions system \
  --llm-context-tokens "$CONTEXT_TOKENS" --concurrency "$CONCURRENCY" \
  --verdict-cache=false \
  --ops-addr "$OPS_ADDR" --log-format text "$@" >"$WORK/serve.log" 2>&1 &
serve_pid=$!
pids+=("$serve_pid")
"$HELPER" sample -pid "$serve_pid" -interval 250ms >"$WORK/rss.txt" &
pids+=($!)

# metric NAME{LABELS}: a sample of serve's metrics, 0 when absent.
metric() {
  curl -fsS --max-time 2 "http://$OPS_ADDR/metrics" 2>/dev/null |
    awk -v m="$1" '$1 == m { v = $2 } END { print v + 0 }'
}
max_in_flight=0
# wait_judged N SECONDS: wait until serve has completed N requests.
wait_judged() {
  local want=$1 secs=$2 done_n in_flight
  for _ in $(seq 1 "$secs"); do
    kill -0 "$serve_pid" 2>/dev/null || { tail -20 "$WORK/serve.log" >&2; die "serve exited"; }
    done_n=$(metric 'rulevalidator_requests_consumed_total{outcome="completed"}')
    in_flight=$(metric rulevalidator_requests_in_flight)
    [ "${in_flight%.*}" -gt "$max_in_flight" ] && max_in_flight=${in_flight%.*}
    [ "${done_n%.*}" -ge "$want" ] && return 0
    sleep 1
  done
  return 1
}

wait_judged $((REQUESTS / 2)) 900 || die "half the requests were not judged within 15 minutes (log: $WORK/serve.log)"
flow_end_ms=$(date +%s%3N)
steady_ms=$(((start_ms + flow_end_ms) / 2)) # the second half of the flow: past the ramp-up

log "stopping the broker for $OUTAGE s with serve running"
bash ops/kafka.sh stop
outage_start_ms=$(date +%s%3N)
sleep "$OUTAGE"
outage_end_ms=$(date +%s%3N)
bash ops/kafka.sh start >/dev/null

wait_judged "$REQUESTS" 900 || log "not every request was judged within 15 minutes after the restart"
end_ms=$(date +%s%3N)

"$BIN" tail --kafka-brokers "$bootstrap" --topics "$(topic summaries),$(topic deadletter)" --from beginning --json --timeout 10s >"$WORK/events.jsonl" 2>"$WORK/tail.log" || true
read -r summarised completed dead <<<"$(python3 - "$WORK/events.jsonl" "$RUN_ID" <<'PY'
import json, sys
ids, done, dead = set(), set(), 0
for line in open(sys.argv[1]):
    rec = json.loads(line)
    ev = rec.get("event") or {}
    if rec["topic"].endswith(".deadletter"):
        dead += 1
    elif ev.get("request_id", "").startswith(sys.argv[2]):
        ids.add(ev["request_id"])
        if ev.get("status") == "completed":
            done.add(ev["request_id"])
print(len(ids), len(done), dead)
PY
)"

mib() { awk '{ printf "%.0f", $1 / 1024 }'; }
# window FROM_MS TO_MS: "max median first last" of VmRSS (KiB) over the
# window; first and last are the means of its first and last 5 s.
window() {
  python3 - "$WORK/rss.txt" "$1" "$2" <<'PY'
import statistics, sys
lo, hi = int(sys.argv[2]), int(sys.argv[3])
r = [int(f[1]) for f in (l.split() for l in open(sys.argv[1])) if len(f) == 3 and lo <= int(f[0]) <= hi]
if not r:
    print("0 0 0 0"); sys.exit()
k = min(len(r), 20)
print(max(r), statistics.median(r), sum(r[:k]) / k, sum(r[-k:]) / k)
PY
}
read -r flow_max _ _ _ <<<"$(window "$start_ms" "$flow_end_ms")"
read -r _ flow_median _ _ <<<"$(window "$steady_ms" "$flow_end_ms")"
read -r out_max _ out_first out_last <<<"$(window "$outage_start_ms" "$outage_end_ms")"
read -r after_max _ _ _ <<<"$(window "$outage_end_ms" "$end_ms")"
echo "start $start_ms flow_end $flow_end_ms outage_start $outage_start_ms outage_end $outage_end_ms end $end_ms" >"$WORK/phases.txt"
hwm=$(tail -1 "$WORK/rss.txt" | awk '{ print $3 }')

printf '\nrulevalidator serve --concurrency %s%s: %s requests of %s bytes, model delay %s, context %s tokens\n' \
  "$CONCURRENCY" "${*:+ $*}" "$REQUESTS" "$DOC_BYTES" "$DELAY" "$CONTEXT_TOKENS"
printf '%-34s %10s\n' "phase" "RSS MiB"
printf '%-34s %10s\n' "flowing: peak" "$(mib <<<"$flow_max")"
printf '%-34s %10s\n' "flowing: steady (median)" "$(mib <<<"$flow_median")"
printf '%-34s %10s\n' "broker stopped: first 5 s" "$(mib <<<"$out_first")"
printf '%-34s %10s\n' "broker stopped: last 5 s" "$(mib <<<"$out_last")"
printf '%-34s %10s\n' "broker stopped: peak" "$(mib <<<"$out_max")"
printf '%-34s %10s\n' "after the restart: peak" "$(mib <<<"$after_max")"
printf '%-34s %10s\n' "VmHWM (whole run)" "$(mib <<<"$hwm")"
printf '%-34s %10s\n' "requests in flight (max seen)" "$max_in_flight"
printf '%-34s %10s\n' "summaries (completed / sent)" "$completed / $REQUESTS"
printf '%-34s %10s\n' "dead letters" "$dead"
printf '%-34s %10s\n' "seconds (flowing, total)" "$(((flow_end_ms - start_ms) / 1000)), $(((end_ms - start_ms) / 1000))"
printf 'samples: %s (phases: %s), serve log: %s\n' "$WORK/rss.txt" "$WORK/phases.txt" "$WORK/serve.log"

# The run's topics hold a gigabyte or so of requests; the figures are taken.
bash ops/kafka.sh delete-topics "$(topic requests)" "$(topic verdicts)" "$(topic summaries)" "$(topic deadletter)" || true

if [ "$completed" -ne "$REQUESTS" ] || [ "$summarised" -ne "$REQUESTS" ]; then
  die "$((REQUESTS - completed)) of $REQUESTS requests have no completed summary"
fi
if [ "$MAX_RSS_MB" -gt 0 ] && [ "$((hwm / 1024))" -ge "$MAX_RSS_MB" ]; then
  die "peak RSS $(mib <<<"$hwm") MiB is over the budget of $MAX_RSS_MB MiB (MEMBENCH_MAX_RSS_MB)"
fi
log "peak RSS $(mib <<<"$hwm") MiB, within the budget of $MAX_RSS_MB MiB"
