#!/usr/bin/env bash
# Python clients nobody here wrote, for interoperability tests: fastavro (reads and
# writes the Avro events) and confluent-kafka (a librdkafka consumer/producer), from
# PyPI into a virtualenv under the cache.
#
#   ops/pyclients.sh install | python | status
#
# `python` prints the virtualenv's interpreter, for tests and scripts to run.
# Env: RULEVALIDATOR_CACHE.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

FASTAVRO_VERSION="1.13.1"
CONFLUENT_KAFKA_VERSION="2.16.1"

VENV="$RV_CACHE/pyclients/venv"
PYTHON="$VENV/bin/python"

installed() {
  [ -x "$PYTHON" ] && "$PYTHON" - "$FASTAVRO_VERSION" "$CONFLUENT_KAFKA_VERSION" <<'PY' 2>/dev/null
import sys
import confluent_kafka
import fastavro
sys.exit(0 if (fastavro.__version__, confluent_kafka.__version__) == (sys.argv[1], sys.argv[2]) else 1)
PY
}

install() {
  if installed; then log "already installed in $VENV"; return 0; fi
  command -v python3 >/dev/null || die "python3 is needed to create the virtualenv"
  if [ ! -x "$PYTHON" ]; then
    log "creating virtualenv in $VENV"
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV" || die "creating the virtualenv failed (is the python3 venv module installed?)"
  fi
  log "installing fastavro $FASTAVRO_VERSION and confluent-kafka $CONFLUENT_KAFKA_VERSION from PyPI"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check \
    "fastavro==$FASTAVRO_VERSION" "confluent-kafka==$CONFLUENT_KAFKA_VERSION" \
    || die "pip install failed (see the output above)"
  installed || die "installed, but the versions do not import as expected"
  log "installed: $PYTHON"
}

case "${1:-}" in
  install) install ;;
  python) installed || die "not installed; run: $0 install"; echo "$PYTHON" ;;
  status)
    if installed; then log "installed: fastavro $FASTAVRO_VERSION, confluent-kafka $CONFLUENT_KAFKA_VERSION in $VENV"
    else log "not installed (run: $0 install)"; exit 1; fi ;;
  *) echo "usage: $0 install | python | status" >&2; exit 2 ;;
esac
