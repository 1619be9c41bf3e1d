#!/usr/bin/env bash
# The main job on a fresh machine, without Docker: brings up the whole local
# stack (Kafka, S3, the local model, Prometheus), starts `rulevalidator serve`,
# publishes the example ruleset and requests (a contract review, and one that
# must dead-letter) and shows what comes out: verdicts as they arrive, the
# summary with its aggregates, the report's download URL, the dead letter,
# where the metrics are and the contract request's trace (its spans, from a
# local Jaeger when it can be built). The stack keeps running afterwards.
#
#   ops/demo.sh          start everything and run the demo (exit 0 once shown)
#   ops/demo.sh stop     stop everything the demo started
#   ops/demo.sh status   say what runs
#
# Env: RULEVALIDATOR_HTTP_ADDR (127.0.0.1:8080), RULEVALIDATOR_OPS_ADDR
# (127.0.0.1:9464), DEMO_TIMEOUT (15m: how long to wait for the model),
# LLM_MODEL (the local model, default qwen2.5-coder-1.5b; gemma-3-270m is fast
# and judges near chance), any setting of serve by its variable (the model's
# profile gives the judging ones: RULEVALIDATOR_LLM_RULES_PER_CALL 1,
# RULEVALIDATOR_LLM_TIMEOUT 10m, and for Qwen RULEVALIDATOR_CONFIDENCE verify and
# RULEVALIDATOR_REVIEW_BELOW_CONFIDENCE 0.45), and the ports of the other
# scripts (KAFKA_PORT, S3_PORT, LLM_PORT, PROM_PORT, JAEGER_UI_PORT,
# JAEGER_OTLP_PORT). DEMO_TRACING=off leaves Jaeger out.
set -euo pipefail
cd "$(dirname "$0")/.."
. ops/lib.sh

HTTP_ADDR="${RULEVALIDATOR_HTTP_ADDR:-127.0.0.1:8080}"
OPS_ADDR="${RULEVALIDATOR_OPS_ADDR:-127.0.0.1:9464}"
DEMO_TIMEOUT="${DEMO_TIMEOUT:-15m}"
PIDFILE="$RV_RUN/serve.pid"
SUMFILE="$RV_RUN/serve.sha256"
LOGFILE="$RV_RUN/serve.log"
KEYS="$RV_CACHE/devkeys"
BIN=bin/rulevalidator
ISSUER=rulevalidator-dev
TENANT=contoso
# TRACING: the OTLP/HTTP endpoint serve sends its spans to (ops/jaeger.sh), "" for none.
TRACING=""

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

stop_all() {
  stop_pid "$PIDFILE" "rulevalidator serve"
  for s in jaeger prometheus llm s3 kafka; do bash "ops/$s.sh" stop || true; done
}

status_all() {
  if pid_alive "$PIDFILE"; then log "rulevalidator serve running (pid $(cat "$PIDFILE"), API http://$HTTP_ADDR, ops http://$OPS_ADDR)"; else log "rulevalidator serve not running"; fi
  for s in kafka s3 llm prometheus jaeger; do bash "ops/$s.sh" status || true; done
}

# start_tracing starts the local Jaeger and points serve at it; when Jaeger cannot be built
# or started the demo says so and goes on without it (the trace id is still shown, and the
# service's log lines carry it).
start_tracing() {
  if [ "${DEMO_TRACING:-on}" = off ]; then
    log "DEMO_TRACING=off: no trace viewer"
    return
  fi
  if bash ops/jaeger.sh start; then
    TRACING=$(bash ops/jaeger.sh otlp)
  else
    log "Jaeger could not be installed or started (see above); the demo goes on without a trace viewer"
  fi
}

# new_traceparent: a W3C traceparent of a new sampled trace.
new_traceparent() {
  printf '00-%s-%s-01' "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" "$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
}

start_serve() {
  # A serve left running by an earlier demo is kept while it runs the binary just built,
  # and restarted when the code changed since.
  local built
  # The build and where its spans go: a change of either restarts it.
  built="$(sha256sum "$BIN" | cut -d' ' -f1) tracing=$TRACING"
  if pid_alive "$PIDFILE"; then
    if [ "$(cat "$SUMFILE" 2>/dev/null)" = "$built" ]; then
      log "rulevalidator serve already running (pid $(cat "$PIDFILE"))"
      return
    fi
    log "rulevalidator serve runs an older build; restarting it"
    stop_pid "$PIDFILE" "rulevalidator serve"
  fi
  for addr in "$HTTP_ADDR" "$OPS_ADDR"; do
    port_busy "${addr##*:}" && die "port ${addr##*:} is taken by another process; set RULEVALIDATOR_HTTP_ADDR / RULEVALIDATOR_OPS_ADDR"
  done
  # shellcheck disable=SC2046
  eval "$(bash ops/s3.sh env)"
  # The local model (ops/llm.sh; LLM_MODEL picks another). Its model profile
  # gives the judging settings measured best for it: one rule a call, one call
  # at a time, a long timeout, and for Qwen the confidence of a check of each
  # verdict against its passages, the review threshold measured for it and a pass
  # its check does not support overruled (docs/local-model.md#defaults-for-the-shipped-models).
  # The environment still overrides any of them (RULEVALIDATOR_CONFIDENCE, ...).
  # Tracing from the standard variables, when a trace viewer runs.
  local otel=()
  [ -n "$TRACING" ] && otel=(OTEL_EXPORTER_OTLP_ENDPOINT="$TRACING" OTEL_SERVICE_NAME=rulevalidator)
  nohup env "${otel[@]}" "$BIN" serve \
    --kafka-brokers "$(bash ops/kafka.sh bootstrap)" \
    --llm-base-url "$(bash ops/llm.sh url)" \
    --model "$(bash ops/llm.sh alias)" \
    --http-addr "$HTTP_ADDR" --ops-addr "$OPS_ADDR" \
    --jwt-pem-files "$KEYS/devtoken.pem" --jwt-issuer "$ISSUER" --jwt-audience rulevalidator \
    --s3-endpoint "$S3_ENDPOINT" --s3-access-key "$S3_ACCESS_KEY" --s3-secret-key "$S3_SECRET_KEY" \
    --s3-bucket "${S3_BUCKET:-rulevalidator-reports}" \
    --log-format text >"$LOGFILE" 2>&1 &
  echo $! >"$PIDFILE"
  echo "$built" >"$SUMFILE"
  if ! wait_http "http://$OPS_ADDR/readyz" 120; then
    tail -20 "$LOGFILE" >&2 || true
    die "rulevalidator serve did not become ready within 120 s (log: $LOGFILE)"
  fi
  log "rulevalidator serve ready: API http://$HTTP_ADDR, metrics http://$OPS_ADDR/metrics (log: $LOGFILE)${TRACING:+, spans to $TRACING}"
}

demo() {
  step "Installing and starting the stack (first run: downloads and builds; later runs: seconds)"
  bash ops/tools.sh install prometheus >/dev/null
  bash ops/kafka.sh start
  bash ops/kafka.sh topics
  # The CLI commands below (rulesets publish, produce, tail) find the broker here, whatever
  # port ops/kafka.sh was given.
  export RULEVALIDATOR_KAFKA_BROKERS
  RULEVALIDATOR_KAFKA_BROKERS=$(bash ops/kafka.sh bootstrap)
  bash ops/s3.sh start
  bash ops/llm.sh start
  start_tracing

  step "Building rulevalidator and a development signing key for API tokens"
  mkdir -p bin
  go build -o "$BIN" ./cmd/rulevalidator
  TOKEN=$(go run ./internal/devtoken -dir "$KEYS" -tenant "$TENANT" -iss "$ISSUER" -aud rulevalidator -ttl 12h)
  start_serve
  RULEVALIDATOR_OPS_ADDR="$OPS_ADDR" bash ops/prometheus.sh start

  step "Publishing the example ruleset to the rulesets topic"
  "$BIN" rulesets publish --file examples/contract-review/ruleset.yaml

  run_id="demo-$(date +%s)"
  good="$run_id-contract"
  bad="$run_id-unknown-ruleset"
  step "Sending two requests: $good (contract review, the agreement as a PDF) and $bad (names a ruleset that does not exist)"
  events="$RV_RUN/demo-events.jsonl"
  # Follow the output topics from now on: a verdict for every rule of the
  # ruleset (those decided without the model too) + 1 summary for the
  # contract review, 1 failed summary + 1 dead letter for the other.
  rules=$(grep -c '^ *- rule_id:' examples/contract-review/ruleset.yaml)
  expected=$((rules + 3))
  "$BIN" tail --from end --topics verdicts,summaries,deadletter --max "$expected" --timeout "$DEMO_TIMEOUT" >"$events.txt" &
  tail_pid=$!
  "$BIN" tail --from end --topics verdicts,summaries,deadletter --max "$expected" --timeout "$DEMO_TIMEOUT" --json >"$events" &
  json_pid=$!
  sleep 2
  # The agreement goes as the PDF itself (request-pdf.json names the file; produce sends it
  # inline), read by the service page by page.
  # The contract review starts a trace of its own, followed below.
  traceparent=$(new_traceparent)
  trace_id=$(cut -d- -f2 <<<"$traceparent")
  "$BIN" produce --file examples/contract-review/request-pdf.json --request-id "$good" --traceparent "$traceparent"
  "$BIN" produce --file examples/contract-review/request-unknown-ruleset.json --request-id "$bad"

  step "Events as they arrive (the local model on two cores: a few minutes)"
  shown=0
  while kill -0 "$tail_pid" 2>/dev/null || [ "$shown" -lt "$(wc -l <"$events.txt")" ]; do
    total=$(wc -l <"$events.txt")
    if [ "$total" -gt "$shown" ]; then
      sed -n "$((shown + 1)),${total}p" "$events.txt"
      shown=$total
    fi
    sleep 1
  done
  wait "$tail_pid" || die "tail stopped before all events arrived (see $LOGFILE)"
  wait "$json_pid" || true
  # tail stops quietly after --timeout without a record; say so rather than
  # show a demo without its verdicts.
  got=$(wc -l <"$events")
  [ "$got" -ge "$expected" ] ||
    die "$got of $expected events arrived within $DEMO_TIMEOUT of silence; the service's log says why: $LOGFILE"

  step "Summary and report"
  python3 - "$events" "$good" "$HTTP_ADDR" "$TOKEN" <<'PY'
import json, sys, urllib.request
events, good, addr, token = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
for line in open(events):
    rec = json.loads(line)
    ev = rec.get("event") or {}
    if rec["topic"].endswith("summaries") and ev.get("request_id") == good:
        agg = ev["aggregate"]
        print(f"request {good}: status {ev['status']}, counts {ev['counts']}")
        if agg.get("boolean"):
            b = agg["boolean"]; print(f"  boolean ({b['mode']}): {'PASSED' if b['passed'] else 'FAILED'}, {b['passed_count']} of {b['applicable']} applicable rules passed")
        if agg.get("numerical"):
            n = agg["numerical"]; score = "n/a" if n["score"] is None else f"{n['score']:.2f}"; print(f"  numerical ({n['mode']}): {score} over {n['counted']} rules")
        rep = ev.get("validation_report")
        if rep:
            url = f"http://{addr}/rule-validation-reports/{rep['reference_id']}"
            req = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
            with urllib.request.urlopen(req) as resp:
                data = resp.read()
            path = "/tmp/" + rep["file_name"]
            open(path, "wb").write(data)
            print(f"  report: {url}\n          (needs a token of tenant contoso; saved {len(data)} bytes to {path})")
    if rec["topic"].endswith("deadletter"):
        print(f"dead letter: reason {ev.get('reason')}: {ev.get('message')}")
        print(f"  original message kept byte for byte: {ev.get('original_topic')}/{ev.get('original_partition')}/{ev.get('original_offset')}")
PY

  step "The trace of $good"
  echo "trace id: $trace_id (every log line of the request carries it: grep $trace_id $LOGFILE)"
  if [ -n "$TRACING" ]; then
    python3 - "$(bash ops/jaeger.sh url)" "$trace_id" <<'PY' || log "the trace could not be read from Jaeger"
import json, sys, time, urllib.request
base, trace_id = sys.argv[1], sys.argv[2]
api = f"{base}/api/traces/{trace_id}"
# Spans are exported in batches every few seconds; the trace is whole once the span of the
# request's processing, which ends last, is in.
spans, deadline = [], time.time() + 30
while time.time() < deadline:
    try:
        with urllib.request.urlopen(api, timeout=5) as resp:
            data = json.loads(resp.read())["data"]
        spans = data[0]["spans"] if data else []
    except Exception:
        spans = []
    if any(s["operationName"].startswith("process ") for s in spans):
        break
    time.sleep(1)
if not spans:
    print(f"Jaeger has no span of trace {trace_id} yet: {api}")
    sys.exit(0)
by_id = {s["spanID"]: s for s in spans}
children = {}
for s in spans:
    parent = next((r["spanID"] for r in s.get("references", []) if r["refType"] == "CHILD_OF" and r["spanID"] in by_id), None)
    children.setdefault(parent, []).append(s)
start = min(s["startTime"] for s in spans)
def show(s, depth):
    tags = {t["key"]: t["value"] for t in s.get("tags", [])}
    extra = ""
    if "gen_ai.usage.input_tokens" in tags:
        extra = f"  tokens {tags['gen_ai.usage.input_tokens']} in, {tags.get('gen_ai.usage.output_tokens', 0)} out"
    if tags.get("error") is True or tags.get("otel.status_code") == "ERROR":
        extra += "  ERROR"
    print(f"{(s['startTime'] - start) / 1e6:8.2f}s {s['duration'] / 1e6:8.2f}s  {'  ' * depth}{s['operationName']}{extra}")
    for c in sorted(children.get(s["spanID"], []), key=lambda c: c["startTime"]):
        show(c, depth + 1)
print(f"{len(spans)} spans (start, duration, span):")
for root in sorted(children.get(None, []), key=lambda c: c["startTime"]):
    show(root, 0)
print(f"as JSON: {api}")
PY
    echo "in Jaeger: $(bash ops/jaeger.sh url)/trace/$trace_id (Jaeger built from the Go module proxy serves a"
    echo "  placeholder page there: its web UI is not part of the module; a Jaeger UI or Grafana pointed at"
    echo "  $(bash ops/jaeger.sh url) shows the trace)"
  else
    echo "no trace viewer runs (bash ops/jaeger.sh start builds one); the spans were not exported"
  fi

  step "Metrics"
  curl -fsS "http://$OPS_ADDR/metrics" | grep -E '^rulevalidator_(requests_consumed_total|dead_letters_total|verdicts_published_total)' | grep -v ' 0$' || true
  echo "service metrics:  http://$OPS_ADDR/metrics"
  echo "Prometheus:       $(bash ops/prometheus.sh url) (alerts: $(bash ops/prometheus.sh url)/alerts)"

  step "Review: the queue, one review, the final outcome"
  python3 - "$good" "$HTTP_ADDR" "$TOKEN" <<'PY'
import json, sys, urllib.request, urllib.error
good, addr, token = sys.argv[1], sys.argv[2], sys.argv[3]
def call(method, path, body=None):
    req = urllib.request.Request(f"http://{addr}{path}", method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
def conf(c):
    return "-" if c is None else f"{c:.2f}"
status, queue = call("GET", "/v1/reviews?status=pending")
items = [it for it in queue.get("items", []) if it["request_id"] == good]
print(f"GET /v1/reviews?status=pending: {len(items)} verdict(s) of request {good} wait for a review, least confident first")
for it in items:
    print(f"  {it['rule_id']:<28} {it['verdict']:<15} confidence {conf(it['confidence'])}  {', '.join(it['review_reasons'])}")
_, job = call("GET", f"/v1/validations/{good}")
verdicts = {v["rule_id"]: v for v in (job.get("result") or {}).get("verdicts", [])}
target = items[0]["rule_id"] if items else next(iter(verdicts), None)
if target is None:
    print("  no verdict to review"); sys.exit(0)
v = verdicts[target]
body = {"review_id": f"demo-{good}-{target}", "rule_id": target, "decision": "override",
        "note": "Checked against the contract by the demo's reviewer."}
if v["rule_type"] == "numerical":
    other = [s for s in v["allowed_scores"] if s != v["numerical_output"]]
    body["numerical_output"] = other[0] if other else v["numerical_output"]
else:
    body["boolean_output"] = not bool(v["boolean_output"])
passages = [e["passage_id"] for e in v["evidences"] if e.get("passage_id")]
if passages:
    body["passage_ids"] = passages[:1]
status, review = call("POST", f"/v1/validations/{good}/reviews", body)
print(f"POST /v1/validations/{good}/reviews (override of {target}): {status}, reviewer {review.get('reviewer')}")
status, again = call("POST", f"/v1/validations/{good}/reviews", body)
print(f"  posted again with the same review_id: {status} (stored once)")
_, job = call("GET", f"/v1/validations/{good}")
res = job["result"]
v = next(x for x in res["verdicts"] if x["rule_id"] == target)
model = v["numerical_output"] if v["rule_type"] == "numerical" else v["boolean_output"]
final = v["final"]
print(f"  {target}: model {model} (confidence {conf(v['confidence'])}) -> final {final['outcome']} from the {final['source']}, {len(v['review_history'])} review(s)")
for name, agg in (("model's", res["summary"]["aggregate"]), ("final", res["summary"]["final_aggregates"])):
    b, n = agg.get("boolean"), agg.get("numerical")
    parts = []
    if b: parts.append(f"boolean {'PASSED' if b['passed'] else 'FAILED'} {b['passed_count']}/{b['applicable']}")
    if n: parts.append("numerical " + ("n/a" if n["score"] is None else f"{n['score']:.2f}"))
    print(f"  {name} aggregates: {', '.join(parts)}")
PY
  echo "report with the reviewers' columns: http://$HTTP_ADDR/v1/validations/$good/report"

  echo "API token for tenant $TENANT (12 h): $TOKEN"
  echo
  echo "Review page: http://$HTTP_ADDR/review/ (sign in with the token above; then open"
  echo "  http://$HTTP_ADDR/review/validations/$good for the contract beside its verdicts)"
  echo
  echo "The stack keeps running; stop it with: bash ops/demo.sh stop"
}

case "${1:-start}" in
  start) demo ;;
  stop) stop_all ;;
  status) status_all ;;
  *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac
