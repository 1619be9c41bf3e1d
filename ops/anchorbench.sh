#!/usr/bin/env bash
# Anchoring benchmark: real contracts (engine/anchor/testdata/contracts) and quotes
# corrupted the ways a model misquotes, anchored by engine/anchor and by a second
# aligner, rapidfuzz's fuzz.partial_ratio_alignment (PyPI, into a virtualenv under
# the cache), with recall and precision per category printed side by side.
#
#   ops/anchorbench.sh
#
# The Go side's targets (recall >= 0.95, precision >= 0.99, no invented quote
# anchored) are asserted by TestAnchorBenchmark, which runs with the unit tests.
# Env: RULEVALIDATOR_CACHE.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RAPIDFUZZ_VERSION="3.14.6"
VENV="$RV_CACHE/anchorbench/venv"
PYTHON="$VENV/bin/python"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

if ! "$PYTHON" -c "import rapidfuzz, sys; sys.exit(rapidfuzz.__version__ != '$RAPIDFUZZ_VERSION')" 2>/dev/null; then
  command -v python3 >/dev/null || die "python3 is needed to create the virtualenv"
  log "installing rapidfuzz $RAPIDFUZZ_VERSION into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "rapidfuzz==$RAPIDFUZZ_VERSION"
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
(cd "$ROOT" && ANCHORBENCH_OUT="$out/cases.json" go test -count=1 -run '^TestAnchorBenchmark$' ./engine/anchor/ >"$out/go.log") ||
  { cat "$out/go.log" >&2; die "TestAnchorBenchmark failed"; }
"$PYTHON" "$ROOT/engine/anchor/testdata/rapidfuzz_align.py" "$out/cases.json"
