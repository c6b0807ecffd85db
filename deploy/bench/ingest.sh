#!/usr/bin/env bash
# Ingest benchmark: turns/s end to end (publish -> RabbitMQ -> release `deja worker` process ->
# fake LLM -> embedding -> Neo4j), LLM calls and tokens per turn, peak RSS of the worker.
#
#   deploy/bench/ingest.sh            # the full matrix (see CONFIGS below)
#   DEJA_BENCH_QUICK=1 deploy/bench/ingest.sh
#   INGEST_CONFIGS="0:4:200 500:16:200" deploy/bench/ingest.sh   # latency_ms:concurrency:turns
#
# Each configuration gets its own fake LLM process (`deja-fake-llm --latency-ms L`), its own
# worker process (`DEJA__WORKER__CONCURRENCY=C`, prefetch = max(C, 16)), a unique queue and
# exchange (`deja.bench.<id>`, `deja.bench.<id>.turns`) and a unique org, so it never meets the
# default `deja.extract` queue or anyone else's data. Turns come from deploy/bench/turns.py
# (distinct realistic text, 4 turns per conversation, published round-robin by turn index).
# The clock starts when `deja publish` starts (the worker is already consuming) and stops when
# the worker's /metrics counters show every turn processed or dead-lettered; the run is then
# checked against Neo4j (`deja list`) and the queue depth (management API). Afterwards the
# bench queues/exchanges and the bench org's nodes are deleted (DEJA_BENCH_KEEP=1 keeps them).
#
# Needs: deploy/services.sh up, deploy/embeddings.sh, release binaries (DEJA_BIN, FAKE_LLM_BIN;
# deploy/bench.sh builds them). Prints one RESULT line per configuration.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/../.." && pwd)"
DEJA_BIN="${DEJA_BIN:-$REPO/target/release/deja}"
FAKE_LLM_BIN="${FAKE_LLM_BIN:-$REPO/target/release/deja-fake-llm}"
MGMT="${RABBITMQ_MGMT_URL:-http://127.0.0.1:${RABBITMQ_MGMT_PORT:-15672}}"
MGMT_AUTH="${RABBITMQ_MGMT_AUTH:-guest:guest}"
NEO4J_HTTP="${NEO4J_HTTP_URL:-http://127.0.0.1:${NEO4J_HTTP_PORT:-7474}}"
TIMEOUT_SECS="${INGEST_TIMEOUT_SECS:-600}"

if [ -n "${INGEST_CONFIGS:-}" ]; then
  CONFIGS="$INGEST_CONFIGS"
elif [ "${DEJA_BENCH_QUICK:-0}" = 1 ]; then
  CONFIGS="0:1:40 0:4:80 0:16:80 500:1:20 500:4:40 500:16:80"
else
  # 500 ms x concurrency 1 is bounded by the fake's latency (>= 0.5 s per turn): 40 turns.
  CONFIGS="0:1:200 0:4:200 0:16:200 500:1:40 500:4:200 500:16:200"
fi

for bin in "$DEJA_BIN" "$FAKE_LLM_BIN"; do
  [ -x "$bin" ] || { echo "missing $bin: cargo build --release -p deja-cli -p deja-fake-llm" >&2; exit 1; }
done
eval "$("$REPO/deploy/services.sh" env)"
eval "$("$REPO/deploy/embeddings.sh" env)"
export DEJA__LOG__FORMAT=json DEJA__LOG__FILTER="${INGEST_LOG_FILTER:-warn}"

RUN_ID="${INGEST_RUN_ID:-$(date +%Y%m%d%H%M%S)-$$}"
WORK="$REPO/.deja/bench/ingest-$RUN_ID"
mkdir -p "$WORK"

FAKE_PID="" WORKER_PID=""
stop_pid() { # stop_pid PID: SIGTERM, then SIGKILL after 35 s (worker grace is 30 s)
  local pid="$1" i
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 350; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup_processes() { stop_pid "$WORKER_PID"; WORKER_PID=""; stop_pid "$FAKE_PID"; FAKE_PID=""; }
trap 'cleanup_processes' EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
metric_sum() { # metric_sum TEXT NAME [LABEL-FILTER]: sum of a counter's series
  awk -v name="$2" -v filter="${3:-}" '
    $1 ~ ("^" name "({|$)") && (filter == "" || index($1, filter) > 0) { s += $NF }
    END { printf "%d", s }' <<<"$1"
}
cpu_ticks() { # user + system CPU time of a process, in clock ticks (/proc/PID/stat 14 + 15)
  sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
}
queue_field() { # queue_field QUEUE FIELD
  curl -s -u "$MGMT_AUTH" "$MGMT/api/queues/%2F/$1" | jq -r ".$2 // 0" 2>/dev/null || echo 0
}
cypher() { # cypher STATEMENT PARAMS-JSON
  curl -s -u "$DEJA__NEO4J__USER:$DEJA__NEO4J__PASSWORD" -H 'Content-Type: application/json' \
    "$NEO4J_HTTP/db/neo4j/tx/commit" \
    -d "$(jq -n --arg s "$1" --argjson p "$2" '{statements: [{statement: $s, parameters: $p}]}')"
}
delete_bench_topology() { # every queue and exchange named deja.bench.<id>*
  local prefix="$1" name
  for name in $(curl -s -u "$MGMT_AUTH" "$MGMT/api/queues/%2F?columns=name" \
      | jq -r --arg p "$prefix" '.[].name | select(startswith($p))'); do
    curl -s -o /dev/null -u "$MGMT_AUTH" -X DELETE "$MGMT/api/queues/%2F/$name"
  done
  for name in $(curl -s -u "$MGMT_AUTH" "$MGMT/api/exchanges/%2F?columns=name" \
      | jq -r --arg p "$prefix" '.[].name | select(startswith($p))'); do
    curl -s -o /dev/null -u "$MGMT_AUTH" -X DELETE "$MGMT/api/exchanges/%2F/$name"
  done
}

run_config() { # run_config LATENCY_MS CONCURRENCY TURNS
  local latency="$1" conc="$2" turns="$3"
  local id="$RUN_ID-l$latency-c$conc" convs=$(( (turns + 3) / 4 ))
  local org="bench-ingest-$id" queue="deja.bench.$id"
  local fake_port metrics_port events="$WORK/turns-l$latency-c$conc.jsonl"
  python3 "$BENCH_DIR/turns.py" --org "$org" --conversations "$convs" --turns 4 \
    | head -n "$turns" >"$events"

  fake_port="$(free_port)"
  "$FAKE_LLM_BIN" --port "$fake_port" --latency-ms "$latency" >"$WORK/fake-$latency-$conc.log" 2>&1 &
  FAKE_PID=$!
  local i
  for ((i = 0; i < 100; i++)); do
    curl -sf "http://127.0.0.1:$fake_port/v1/models" >/dev/null && break; sleep 0.1
  done

  metrics_port="$(free_port)"
  DEJA__RABBITMQ__NAME_PREFIX="$queue" DEJA__RABBITMQ__EXCHANGE="$queue.turns" \
  DEJA__RABBITMQ__PREFETCH="$(( conc > 16 ? conc : 16 ))" DEJA__WORKER__CONCURRENCY="$conc" \
  DEJA__WORKER__METRICS_ADDR="127.0.0.1:$metrics_port" \
  DEJA__LLM__BASE_URL="http://127.0.0.1:$fake_port/v1" DEJA__LLM__API_KEY="" \
  DEJA__LLM__MODEL="deja-fake" \
    "$DEJA_BIN" worker >"$WORK/worker-$latency-$conc.log" 2>&1 &
  WORKER_PID=$!
  # Ready = the worker consumes the bench queue (model loaded, topology declared).
  for ((i = 0; i < 600; i++)); do
    kill -0 "$WORKER_PID" 2>/dev/null \
      || { echo "worker exited; see $WORK/worker-$latency-$conc.log" >&2; tail -5 "$WORK/worker-$latency-$conc.log" >&2; return 1; }
    [ "$(queue_field "$queue" consumers)" -ge 1 ] 2>/dev/null && break
    sleep 0.1
  done
  local rss_idle cpu0 cpu1
  rss_idle="$(awk '/^VmRSS/ {print $2}' "/proc/$WORKER_PID/status")"
  cpu0="$(cpu_ticks "$WORKER_PID")"

  local t0 t1 text processed=0 dead=0
  t0="$(date +%s%N)"
  DEJA__RABBITMQ__NAME_PREFIX="$queue" DEJA__RABBITMQ__EXCHANGE="$queue.turns" DEJA__LOG__FILTER=error \
    "$DEJA_BIN" publish "$events" >"$WORK/publish-$latency-$conc.log" 2>&1 \
    || { echo "publish failed; see $WORK/publish-$latency-$conc.log" >&2; return 1; }
  local deadline=$(( $(date +%s) + TIMEOUT_SECS ))
  while :; do
    text="$(curl -s "http://127.0.0.1:$metrics_port/metrics" || true)"
    processed="$(metric_sum "$text" deja_worker_events_processed_total)"
    dead="$(metric_sum "$text" deja_worker_events_dead_lettered_total)"
    [ $((processed + dead)) -ge "$turns" ] && break
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "timeout after ${TIMEOUT_SECS}s: processed $processed dead $dead of $turns" >&2; break
    fi
    sleep 0.1
  done
  t1="$(date +%s%N)"
  text="$(curl -s "http://127.0.0.1:$metrics_port/metrics")"
  local hwm
  hwm="$(awk '/^VmHWM/ {print $2}' "/proc/$WORKER_PID/status")"
  cpu1="$(cpu_ticks "$WORKER_PID")"

  local calls ptok ctok retried failures
  calls="$(metric_sum "$text" deja_llm_requests_total 'kind="extract"')"
  ptok="$(metric_sum "$text" deja_llm_tokens_total 'direction="prompt"')"
  ctok="$(metric_sum "$text" deja_llm_tokens_total 'direction="completion"')"
  retried="$(metric_sum "$text" deja_worker_events_retried_total)"
  failures="$(metric_sum "$text" deja_worker_extraction_failures_total)"
  local synth
  synth="$(metric_sum "$text" deja_llm_requests_total 'kind="synthesize"')"

  # Verify against the store and the broker.
  local listed episodes turn_sum depth
  listed="$(DEJA__LOG__FILTER=error "$DEJA_BIN" list --org "$org" --json --limit 100000)"
  episodes="$(jq 'length' <<<"$listed")"
  turn_sum="$(jq '[.[].turn_count] | add // 0' <<<"$listed")"
  # The management API refreshes queue stats every 5 s: wait for a fresh zero (at most 15 s).
  for ((i = 0; i < 30; i++)); do
    depth="$(queue_field "$queue" messages)"
    [ "$depth" = 0 ] && break
    sleep 0.5
  done

  cleanup_processes

  awk -v lat="$latency" -v conc="$conc" -v turns="$turns" -v ns="$((t1 - t0))" \
      -v calls="$calls" -v ptok="$ptok" -v ctok="$ctok" -v hwm="$hwm" -v idle="$rss_idle" \
      -v retried="$retried" -v dead="$dead" -v fail="$failures" -v eps="$episodes" \
      -v tsum="$turn_sum" -v depth="$depth" -v synth="$synth" -v processed="$processed" \
      -v ticks="$((cpu1 - cpu0))" -v hz="$(getconf CLK_TCK)" 'BEGIN {
    s = ns / 1e9
    printf "RESULT latency_ms=%d concurrency=%d turns=%d processed=%d seconds=%.2f turns_per_s=%.2f llm_calls_per_turn=%.2f prompt_tokens_per_turn=%.0f completion_tokens_per_turn=%.0f synth_calls=%d retried=%d dead_lettered=%d failed_extractions=%d episodes=%d turns_stored=%d queue_depth=%d worker_cpu_ms_per_turn=%.1f worker_rss_idle_mib=%.1f worker_peak_rss_mib=%.1f\n",
      lat, conc, turns, processed, s, turns / s, calls / turns, ptok / turns, ctok / turns, synth,
      retried, dead, fail, eps, tsum, depth, ticks * 1000 / hz / turns, idle / 1024, hwm / 1024
  }'
  [ "$depth" = 0 ] && [ "$turn_sum" = "$turns" ] \
    || echo "WARNING: $org: queue depth $depth, $turn_sum of $turns turns stored" >&2

  if [ "${DEJA_BENCH_KEEP:-0}" != 1 ]; then
    delete_bench_topology "$queue"
    # shellcheck disable=SC2016 # $org is a Cypher parameter
    cypher 'MATCH (n) WHERE (n:Episode OR n:TurnInput) AND n.org = $org DETACH DELETE n' \
      "$(jq -n --arg org "$org" '{org: $org}')" >/dev/null
  fi
}

echo "ingest bench $RUN_ID: configs (latency_ms:concurrency:turns) $CONFIGS"
echo "logs and generated turns in $WORK"
for config in $CONFIGS; do
  IFS=: read -r latency conc turns <<<"$config"
  run_config "$latency" "$conc" "$turns"
done
