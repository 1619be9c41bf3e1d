#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs and starts every real
# component the integration tests need (from package registries, cached outside
# the repo), then runs all Go tests with the race detector, skipping nothing.
#
#   ops/test.sh            everything
#   ops/test.sh -run Foo   extra flags go to `go test`
set -euo pipefail
cd "$(dirname "$0")/.."
. ops/lib.sh

started=()
cleanup() {
  for s in "${started[@]}"; do bash "ops/$s.sh" stop >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

# start_service NAME: start ops/NAME.sh unless it already runs; stop it at exit
# only if this script started it.
start_service() {
  if bash "ops/$1.sh" status >/dev/null 2>&1; then
    log "$1 already running; using it"
  else
    bash "ops/$1.sh" start
    started+=("$1")
  fi
}

log "go $(go version | awk '{print $3}'); checking formatting and vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
[ -z "$unformatted" ] || die "gofmt would change: $unformatted"
go vet ./...

# Tools the integration tests drive: kcat and the Python Kafka/Avro clients
# (interop), promtool (metrics and alert rules), LibreOffice (reports open).
bash ops/tools.sh install all
bash ops/pyclients.sh install

start_service kafka
start_service s3
start_service llm
export OPENAI_BASE_URL="$(bash ops/llm.sh url)"

# Integration tests must run here: a missing service is a failure, not a skip.
export RULEVALIDATOR_REQUIRE_INTEGRATION=1

# One package at a time (-p 1): several packages restart the shared local
# broker on purpose, which would disturb another package's tests running
# alongside.
log "running go test -race -p 1 ./..."
go test -race -count=1 -p 1 -timeout 45m "$@" ./...
