#!/usr/bin/env bash
# Reproduces every figure of docs/BENCHMARKS.md, one bench after the other (never two at once):
#
#   1. the machine (cores, memory, CPU model, load, the busiest other processes)
#   2. release builds: deja, deja-fake-llm, the embed_bench and search_bench examples (nice'd);
#      then `deja migrate` (idempotent), which a fresh store needs before the worker starts
#   3. embedding: texts/s at batch 1 and 64 + peak RSS, Rust vs Python onnxruntime reference
#      (crates/deja-embed/bench/run.sh)
#   4. ingest: turns/s through RabbitMQ with the fake LLM at 0 and 500 ms, concurrency 1/4/16,
#      LLM calls and tokens per turn, peak RSS of the worker process (deploy/bench/ingest.sh)
#   5. search: p50/p95/p99 at 1k/10k/100k episodes, team-scoped and org-wide, similarity only,
#      with the query embedding alone as the floor line; then the default pipeline (late
#      interaction) at 10k/100k, and at 10k with episodes of real length (the eval corpus's
#      records, then the episodes the worker wrote with the local model), beside the
#      cross-encoder on the corpus's records (crates/deja-api/examples/search_bench.rs)
#   6. API over HTTP with 4 clients: latency, CPU per search and the latency floor it implies,
#      peak RSS of `deja serve --dev` — similarity only at 10k/100k, the default pipeline at
#      10k (deploy/bench/api_rss.sh)
#
#   deploy/bench.sh                     # full run: ~10 min of benches on 2 cores, plus the build
#   DEJA_BENCH_QUICK=1 deploy/bench.sh  # smaller run (no 100k tier, fewer turns/searches), ~4 min
#   DEJA_BENCH_100K=0 deploy/bench.sh   # full run without the 100k-episode search tier (its
#                                       # first run seeds 100k episodes: a few minutes more)
#   DEJA_BENCH_ONLY="ingest search"     # a subset of: embed ingest search api
#   DEJA_BENCH_NO_BUILD=1               # use the release binaries already built (in the release
#                                       # folder of CARGO_TARGET_DIR, else target/release)
#
# Needs python3, curl and jq (installed with apt when missing), plus what deploy/services.sh
# (Neo4j + RabbitMQ) and deploy/embeddings.sh set up; both are run here (idempotent). Everything printed is also
# written to .deja/bench/bench-<time>.txt.
set -euo pipefail

DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$DEPLOY_DIR/.." && pwd)"
# shellcheck source=SCRIPTDIR/lib.sh
. "$DEPLOY_DIR/lib.sh"
command -v jq >/dev/null 2>&1 || apt_install jq
command -v curl >/dev/null 2>&1 || apt_install curl
QUICK="${DEJA_BENCH_QUICK:-0}"
ONLY="${DEJA_BENCH_ONLY:-embed ingest search api}"
STAMP="$(date +%Y%m%d-%H%M%S)"
mkdir -p "$REPO/.deja/bench"
OUT="$REPO/.deja/bench/bench-$STAMP.txt"
exec > >(tee "$OUT") 2>&1

wants() { [[ " $ONLY " == *" $1 "* ]]; }
section() { printf '\n=== %s (%s) ===\n' "$1" "$(date +%H:%M:%S)"; }
started="$(date +%s)"

section "machine"
echo "date:      $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "cpu:       $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), nproc $(nproc)"
echo "memory:    $(free -h | awk '/^Mem:/ {print $2 " total, " $7 " available"}')"
echo "kernel:    $(uname -sr)"
echo "rustc:     $(rustc --version 2>/dev/null || echo n/a)"
echo "load avg:  $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"
other_load() { # the busiest processes over the last 2 s (CPU % of one core, RSS MiB)
  top -b -e k -n 2 -d 2 -w 200 | awk '/^top -/ { n++ } n == 2 && $1 ~ /^[0-9]+$/ && $9 + 0 > 1 {
    printf "  %6s %5s%% %7.0f MiB  %s\n", $1, $9, $6 / 1024, $12 }' | head -6
}
echo "busiest processes now (%CPU of one core over 2 s, RSS):"
other_load
WITH_100K="${DEJA_BENCH_100K:-$([ "$QUICK" = 1 ] && echo 0 || echo 1)}"
echo "mode:      $([ "$QUICK" = 1 ] && echo quick || echo full)$([ "$WITH_100K" = 1 ] && echo ', with the 100k search tier')"

section "services and assets"
"$REPO/deploy/services.sh" up
"$REPO/deploy/embeddings.sh" >/dev/null
eval "$("$REPO/deploy/services.sh" env)"
eval "$("$REPO/deploy/embeddings.sh" env)"

section "release build (nice)"
t="$(date +%s)"
if [ "${DEJA_BENCH_NO_BUILD:-0}" != 1 ]; then
  ensure_c_toolchain
  (cd "$REPO" && nice -n 10 cargo build --release --quiet -p deja-cli -p deja-fake-llm)
  # The ingest bench measures its embedding ceiling with embed_bench too.
  if wants embed || wants ingest; then (cd "$REPO" && nice -n 10 cargo build --release --quiet -p deja-embed --example embed_bench); fi
  if wants search; then (cd "$REPO" && nice -n 10 cargo build --release --quiet -p deja-api --example search_bench); fi
fi
echo "built in $(( $(date +%s) - t )) s"
export DEJA_BIN="$TARGET_DIR/release/deja" FAKE_LLM_BIN="$TARGET_DIR/release/deja-fake-llm"
export EMBED_BENCH_BIN="$TARGET_DIR/release/examples/embed_bench"

# The schema first: on a fresh store `deja worker` refuses to start without the vector index
# (idempotent: "schema up to date" when nothing is left to apply). ingest.sh and api_rss.sh
# migrate too, so that they also run on their own.
if wants ingest || wants search || wants api; then
  section "schema (deja migrate)"
  [ -x "$DEJA_BIN" ] || die "missing $DEJA_BIN: cargo build --release -p deja-cli (or drop DEJA_BENCH_NO_BUILD)"
  DEJA__LOG__FILTER=error "$DEJA_BIN" migrate || die "deja migrate failed"
fi

if wants embed; then
  section "embedding (crates/deja-embed/bench/run.sh)"
  BENCH_ROUNDS="${BENCH_ROUNDS:-$([ "$QUICK" = 1 ] && echo 1 || echo 3)}" \
    "$REPO/crates/deja-embed/bench/run.sh"
fi

if wants ingest; then
  section "ingest (deploy/bench/ingest.sh)"
  "$DEPLOY_DIR/bench/ingest.sh" | tee "$REPO/.deja/bench/ingest-$STAMP.txt"
  echo
  # A configuration stopped by INGEST_TIMEOUT_SECS (timeout=1) shows the turns that ended
  # (processed + dead-lettered) of those asked for, and "TIMEOUT": its rates are over those.
  printf '%-8s %-5s %-9s %-8s %-8s %-9s %-8s %-10s %-11s %-10s %-15s %-14s %-8s %-10s %-5s %s\n' latency conc turns seconds \
    turns/s ceiling ingest/c mean_batch cpu_ms/turn calls/turn prompt_tok/turn compl_tok/turn retried peak_MiB load note
  grep '^RESULT ' "$REPO/.deja/bench/ingest-$STAMP.txt" | tr ' ' '\n' | awk -F= '
    /^RESULT/ { if (n++) emit(); delete v; next } NF == 2 { v[$1] = $2 }
    END { if (n) emit() }
    function emit(  turns, note) {
      turns = v["turns"]; note = ""
      if (v["timeout"] == 1) { turns = (v["processed"] + v["dead_lettered"]) "/" v["turns"]; note = "TIMEOUT" }
      printf "%-8s %-5s %-9s %-8s %-8s %-9s %-8s %-10s %-11s %-10s %-15s %-14s %-8s %-10s %-5s %s\n", v["latency_ms"] " ms",
        v["concurrency"], turns, v["seconds"], v["turns_per_s"], v["ceiling_texts_per_s"],
        v["ingest_over_ceiling"], v["mean_batch"], v["worker_cpu_ms_per_turn"],
        v["llm_calls_per_turn"],
        v["prompt_tokens_per_turn"], v["completion_tokens_per_turn"], v["retried"],
        v["worker_peak_rss_mib"], v["load_avg_1m"], note
    }'
fi

if wants search; then
  section "search (crates/deja-api/examples/search_bench.rs)"
  if [ "$QUICK" = 1 ]; then sizes=1000,10000; queries=50; else sizes=1000,10000; queries=100; fi
  if [ "$WITH_100K" = 1 ]; then sizes="$sizes,100000"; fi
  echo "similarity only (no late interaction): the pipeline issue 13's 25 ms goal is about"
  (cd "$REPO" && "$TARGET_DIR/release/examples/search_bench" --sizes "$sizes" --queries "$queries" \
    --late 0)
  # The default pipeline scores candidates by late interaction: its own rows (issue 12 allows
  # 250 ms), then with the eval corpus's episodes, and the cross-encoder on those.
  late_sizes=10000; [ "$WITH_100K" = 1 ] && late_sizes="$late_sizes,100000"
  echo
  echo "the default pipeline (late interaction) on ${late_sizes//,/ and } episodes"
  (cd "$REPO" && "$TARGET_DIR/release/examples/search_bench" --sizes "$late_sizes" \
    --queries "$queries")
  echo
  echo "the default pipeline on 10000 episodes of real length (tests/fixtures/eval)"
  (cd "$REPO" && "$TARGET_DIR/release/examples/search_bench" --sizes 10000 \
    --queries "$queries" --corpus tests/fixtures/eval)
  echo
  echo "the default pipeline on 10000 episodes the worker wrote (opening messages and key findings)"
  (cd "$REPO" && "$TARGET_DIR/release/examples/search_bench" --sizes 10000 \
    --queries "$queries" --corpus tests/fixtures/eval \
    --episodes tests/fixtures/eval/extracted-qwen2.5-1.5b-other-40.jsonl)
  echo
  echo "the cross-encoder instead (search.rerank, off by default) on the same episodes"
  (cd "$REPO" && "$TARGET_DIR/release/examples/search_bench" --sizes 10000 \
    --queries "$(( queries / 2 ))" --corpus tests/fixtures/eval --late 0 --rerank 1)
fi

if wants api; then
  section "API over HTTP, 4 clients (deploy/bench/api_rss.sh)"
  searches="${API_SEARCHES:-$([ "$QUICK" = 1 ] && echo 200 || echo 500)}"
  api_orgs=bench-search-v1-10000; [ "$WITH_100K" = 1 ] && api_orgs="$api_orgs bench-search-v1-100000"
  for org in $api_orgs; do
    echo "similarity only, $org:"
    DEJA__LATE_INTERACTION__ENABLED=false API_ORG="$org" API_SEARCHES="$searches" \
      "$DEPLOY_DIR/bench/api_rss.sh"
  done
  echo "the default pipeline (late interaction), bench-search-v3-10000:"
  API_ORG=bench-search-v3-10000 API_SEARCHES="$searches" "$DEPLOY_DIR/bench/api_rss.sh"
fi

section "done"
echo "busiest processes at the end:"
other_load
echo "total $(( $(date +%s) - started )) s; everything above is in $OUT"
echo "load avg at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
