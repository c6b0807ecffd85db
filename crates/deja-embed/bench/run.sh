#!/usr/bin/env bash
# Runs the Rust embedder benchmark (release) and the Python onnxruntime reference on the same
# model files and texts, then prints Rust/Python ratios. Run from anywhere in the repository.
#   crates/deja-embed/bench/run.sh        (BENCH_ROUNDS=N to change the rounds per figure)
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/../../.." && pwd)"
VENV="$REPO/.deja/venv-bench"

if ! "$VENV/bin/python" -c 'import onnxruntime, tokenizers, numpy' >/dev/null 2>&1; then
  echo "setting up $VENV (onnxruntime==1.24.4 tokenizers numpy)" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "onnxruntime==1.24.4" tokenizers numpy
fi

# One after the other, never together: both use every core.
rust_out="$(cd "$REPO" && cargo run --quiet --release -p deja-embed --example embed_bench)"
echo "$rust_out"
echo
py_out="$("$VENV/bin/python" "$BENCH_DIR/reference.py")"
echo "$py_out"
echo

field() { # field OUTPUT NAME -> value from the RESULT line
  grep '^RESULT ' <<<"$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
for name in batch1 batch64 peak_rss_mib; do
  r="$(field "$rust_out" "$name")"
  p="$(field "$py_out" "$name")"
  printf '%-13s rust %8s   python %8s   rust/python %s\n' "$name" "$r" "$p" "$(ratio "$r" "$p")"
done
