#!/usr/bin/env bash
# The main job on a fresh machine: starts the local model (installing it on the
# first run) and judges the example contract review with it.
#
#   ops/demo.sh [extra flags for `rulevalidator validate`, e.g. --json]
set -euo pipefail
cd "$(dirname "$0")/.."
. ops/lib.sh

bash ops/llm.sh start
mkdir -p bin
log "building rulevalidator"
go build -o bin/rulevalidator ./cmd/rulevalidator
export OPENAI_BASE_URL="$(bash ops/llm.sh url)"
log "validating examples/contract-review/input.json against examples/contract-review/ruleset.yaml"
exec bin/rulevalidator validate \
  --ruleset examples/contract-review/ruleset.yaml \
  --input examples/contract-review/input.json "$@"
