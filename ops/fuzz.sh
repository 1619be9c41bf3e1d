#!/usr/bin/env bash
# Runs the native Go fuzz targets one after another, each for a chosen time on
# one worker (-parallel 1), and prints per target its executions and whether
# it found something. A finding is written by go test under the target's
# package, testdata/fuzz/<Target>/, where the normal suite replays it.
#
#   ops/fuzz.sh [duration] [target...]    e.g. ops/fuzz.sh 10m FuzzParseRuleset
#
# duration is go test's -fuzztime (10m, 90s, 50000x; default 10m); with no
# target every target runs. Env: FUZZ_LOG_DIR (a temporary directory): each
# target's full go test output, <Target>.log. Exits 1 when a target found
# something or did not run.
set -uo pipefail
cd "$(dirname "$0")/.."

# Every fuzz target and its package.
TARGETS=(
  "FuzzDecode ./schemas"
  "FuzzUnmarshalRequest ./schemas"
  "FuzzFromJSON ./request"
  "FuzzParseRuleset ./engine"
  "FuzzExpression ./engine/ruleexpr"
  "FuzzCheckAnswer ./engine"
  "FuzzCheckAnswerSingle ./engine"
  "FuzzSegmentPage ./engine"
  "FuzzFind ./engine/anchor"
  "FuzzReadDOCX ./docread"
  "FuzzReadPDF ./docread"
)

duration=10m
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9] ]]; then
  duration=$1
  shift
fi
logs=${FUZZ_LOG_DIR:-$(mktemp -d)}
mkdir -p "$logs"

selected=()
if [ $# -eq 0 ]; then
  selected=("${TARGETS[@]}")
else
  for name in "$@"; do
    found=""
    for t in "${TARGETS[@]}"; do
      [ "${t%% *}" = "$name" ] && found=$t
    done
    [ -n "$found" ] || { echo "fuzz: unknown target $name (known: $(printf '%s ' "${TARGETS[@]%% *}"))" >&2; exit 2; }
    selected+=("$found")
  done
fi

status=0
summary=()
for t in "${selected[@]}"; do
  name=${t%% *} pkg=${t#* }
  log="$logs/$name.log"
  echo "fuzz: $name in $pkg for $duration (log $log)" >&2
  start=$(date +%s)
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$duration" -parallel 1 "$pkg" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  # The last progress line carries the total: "fuzz: elapsed: 10m0s, execs: 123 (...)".
  execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ $rc -eq 0 ]; then
    result="nothing found"
  elif input=$(grep -o 'testdata/fuzz/[^ ]*' "$log" | tail -1) && [ -n "$input" ]; then
    result="FOUND: $pkg/$input"
    status=1
  else
    result="FAILED (exit $rc; see $log)"
    status=1
  fi
  summary+=("$(printf '%-24s %-20s %6ss %12s  %s' "$name" "$pkg" "$took" "${execs:-0}" "$result")")
  echo "${summary[-1]}"
done

printf '\n%-24s %-20s %7s %12s  %s\n' target package time execs result
printf '%s\n' "${summary[@]}"
exit $status
