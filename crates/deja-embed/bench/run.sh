#!/usr/bin/env bash
# Runs the Rust embedder benchmark (release) and the Python onnxruntime reference on the same
# model files and texts, then prints Rust/Python ratios. Run from anywhere in the repository.
#   crates/deja-embed/bench/run.sh        (BENCH_ROUNDS=N to change the rounds per figure)
#
# The Rust side is the `embed_bench` example: EMBED_BENCH_BIN when that is an executable (as
# deploy/bench.sh exports it, after its build); else DEJA_BENCH_NO_BUILD=1 takes the one in
# the release folder of CARGO_TARGET_DIR (else target/) as it is; otherwise it is built there
# first (`nice`, release). The Python side runs in .deja/venv-bench (onnxruntime==1.24.4
# tokenizers numpy), made here; python3 and python3-venv are installed with apt when missing.
#
# Both sides use one thread count per inference: embed_bench takes deja's default
# (`embedding.intra_threads` in crates/deja-config/src/defaults.toml, 1; 0 = one per core), and
# reference.py gets the same through BENCH_THREADS.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/../../.." && pwd)"
DEPLOY_DIR="$REPO/deploy"
# shellcheck source=SCRIPTDIR/../../../deploy/lib.sh
. "$DEPLOY_DIR/lib.sh"
VENV="$REPO/.deja/venv-bench"

# The thread count embed_bench runs with (Settings::defaults(); the example takes no override).
threads="$(awk '/^\[/ { section = $0 } section == "[embedding]" && $1 == "intra_threads" { print $3; exit }' \
  "$REPO/crates/deja-config/src/defaults.toml")"
[ -n "$threads" ] || die "no embedding.intra_threads in crates/deja-config/src/defaults.toml"
if [ -n "${BENCH_THREADS:-}" ] && [ "$BENCH_THREADS" != "$threads" ]; then
  die "BENCH_THREADS=$BENCH_THREADS: embed_bench runs with deja's default embedding.intra_threads ($threads), so the Python reference does too"
fi
export BENCH_THREADS="$threads"

if ! "$VENV/bin/python" -c 'import onnxruntime, tokenizers, numpy' >/dev/null 2>&1; then
  log "setting up $VENV (onnxruntime==1.24.4 tokenizers numpy)" >&2
  command -v python3 >/dev/null 2>&1 || apt_install python3 python3-venv
  # A venv without a working pip (`python3 -m venv` failing halfway for lack of Debian's
  # python3-venv, or an interrupted setup) is made again from scratch.
  if [ -e "$VENV" ] && ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$VENV"
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" >/dev/null 2>&1 \
      || { apt_install python3-venv; rm -rf "$VENV"; python3 -m venv "$VENV" || { rm -rf "$VENV"; die "python3 -m venv $VENV failed"; }; }
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "onnxruntime==1.24.4" tokenizers numpy \
    || die "pip install into $VENV failed"
fi

if [ -n "${EMBED_BENCH_BIN:-}" ] && [ -x "$EMBED_BENCH_BIN" ]; then
  bin="$EMBED_BENCH_BIN"
elif [ "${DEJA_BENCH_NO_BUILD:-0}" = 1 ]; then
  bin="$TARGET_DIR/release/examples/embed_bench"
  [ -x "$bin" ] || die "DEJA_BENCH_NO_BUILD=1 but no $bin (cargo build --release -p deja-embed --example embed_bench)"
else
  ensure_c_toolchain
  (cd "$REPO" && nice -n 10 cargo build --release --quiet -p deja-embed --example embed_bench)
  bin="$TARGET_DIR/release/examples/embed_bench"
fi

# One after the other, never together: each may use every core.
rust_out="$(cd "$REPO" && "$bin")"
echo "$rust_out"
echo
py_out="$("$VENV/bin/python" "$BENCH_DIR/reference.py")"
echo "$py_out"
echo

field() { # field OUTPUT NAME -> value from the RESULT line
  grep '^RESULT ' <<<"$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
echo "intra-op threads per inference, both sides: $threads (0 = one per core)"
for name in batch1 batch64 peak_rss_mib; do
  r="$(field "$rust_out" "$name")"
  p="$(field "$py_out" "$name")"
  printf '%-13s rust %8s   python %8s   rust/python %s\n' "$name" "$r" "$p" "$(ratio "$r" "$p")"
done
