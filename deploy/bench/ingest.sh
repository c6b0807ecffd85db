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
# bench queues/exchanges and every node of the bench org (episodes, turn inputs, token vectors,
# components, skills, strategies, review records) are deleted (DEJA_BENCH_KEEP=1 keeps them),
# also when a run stops early (the worker exits, publishing fails, Ctrl-C): the EXIT trap stops
# the processes, then deletes the configuration's queues, exchanges and org.
# A configuration that does not finish within INGEST_TIMEOUT_SECS (600) stops there: its rates
# are taken over the turns processed or dead-lettered by then, and its RESULT line says
# `timeout=1` (deploy/bench.sh's table marks it).
#
# The embedding-bound ceiling: after the first configuration, before its episodes are deleted,
# the `embed_bench` example (EMBED_BENCH_BIN) embeds the texts the worker embedded, with the
# worker stopped: for each episode, one text per stored turn, made of the fields the worker
# embeds (issue type, description, opening message, summary, key findings, root cause:
# deja_domain::embedding_text), the turns before the last without the root cause (the bench's
# conversations name it in their last turn; the final turn's summary and key findings stand in
# for those of the earlier turns). Its best texts/s over batch sizes 1, 16 and
# 32 (INGEST_CEILING_BATCHES) is the ceiling; each RESULT line carries it and turns_per_s / ceiling (one embedding
# per turn: every turn changes its episode). Without that binary the ceiling is left out.
#
# The worker's embedding micro-batching and recurrence linking follow the environment
# (DEJA__EMBEDDING__BATCH_WINDOW_MS, DEJA__EMBEDDING__MAX_BATCH, DEJA__WORKER__LINK_RECURRENCES,
# defaults from crates/deja-config/src/defaults.toml); each RESULT line says what they were,
# the mean texts per model call seen in the worker's /metrics, and the 1-minute load average.
#
# Needs: deploy/services.sh up, deploy/embeddings.sh, release binaries (DEJA_BIN, FAKE_LLM_BIN,
# EMBED_BENCH_BIN; default: the release folder of CARGO_TARGET_DIR, else target/; deploy/bench.sh
# builds them). Runs `deja migrate` first (idempotent: the worker refuses a store without its
# vector index). Prints one RESULT line per configuration.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DEPLOY_DIR="$(cd "$BENCH_DIR/.." && pwd)"
# shellcheck source=SCRIPTDIR/../lib.sh
. "$DEPLOY_DIR/lib.sh"
command -v jq >/dev/null 2>&1 || apt_install jq
DEJA_BIN="${DEJA_BIN:-$TARGET_DIR/release/deja}"
FAKE_LLM_BIN="${FAKE_LLM_BIN:-$TARGET_DIR/release/deja-fake-llm}"
EMBED_BENCH_BIN="${EMBED_BENCH_BIN:-$TARGET_DIR/release/examples/embed_bench}"
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
# A fresh store has no vector index, without which `deja worker` does not start.
DEJA__LOG__FILTER=error "$DEJA_BIN" migrate || die "deja migrate failed"

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
# The queue prefix and org of the configuration under way: set while it runs, cleared once its
# own cleanup is done, so that the EXIT trap deletes what an aborted run left behind.
CUR_QUEUE="" CUR_ORG=""
on_exit() {
  local rc=$?
  cleanup_processes
  if [ -n "$CUR_QUEUE$CUR_ORG" ] && [ "${DEJA_BENCH_KEEP:-0}" != 1 ]; then
    echo "stopped early: deleting queues/exchanges $CUR_QUEUE and org $CUR_ORG" >&2
    [ -z "$CUR_QUEUE" ] || delete_bench_topology "$CUR_QUEUE" || true
    [ -z "$CUR_ORG" ] || delete_bench_org "$CUR_ORG" || true
  fi
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

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
CEILING="" CEILING_BATCH1=""
measure_ceiling() { # measure_ceiling ORG: the embedding ceiling on ORG's episode texts
  [ -n "$CEILING" ] && return 0
  if [ ! -x "$EMBED_BENCH_BIN" ]; then
    echo "no $EMBED_BENCH_BIN (cargo build --release -p deja-embed --example embed_bench): no ceiling" >&2
    CEILING="n/a" CEILING_BATCH1="n/a"
    return 0
  fi
  local texts="$WORK/episode-texts.jsonl" out
  # The fields of deja_domain::embedding_text, as embed_bench's EMBED_BENCH_EPISODES reads them
  # (key_findings a list, never null).
  # shellcheck disable=SC2016 # $org is a Cypher parameter
  cypher 'MATCH (e:Episode {org: $org}) WHERE e.extraction_status = "ok"
          RETURN e.issue_type, e.issue_description, e.opening_message, e.summary,
                 e.key_findings, e.root_cause, e.turn_count' \
    "$(jq -n --arg org "$1" '{org: $org}')" \
    | jq -c '[.results[0].data[].row as [$t, $d, $o, $s, $f, $r, $n]
        | {issue_type: $t, issue_description: $d, opening_message: $o, summary: $s,
           key_findings: ($f // [])} as $e
        | (range(1; ($n // 1)) as $k | $e + {turn: $k, root_cause: null}),
          ($e + {turn: ($n // 1), root_cause: $r})]
        | sort_by(.turn)[]' >"$texts"
  # In the order the worker meets them (turns are published round-robin by turn index), so a
  # batch pads texts of the same turn, as the worker's micro-batches do.
  out="$(EMBED_BENCH_EPISODES="$texts" BENCH_ROUNDS="${INGEST_CEILING_ROUNDS:-1}" \
    EMBED_BENCH_BATCHES="${INGEST_CEILING_BATCHES:-1,16,32}" EMBED_BENCH_PADDING=0 \
    "$EMBED_BENCH_BIN" 2>&1)" \
    || { echo "embed_bench failed: $out" >&2; CEILING="n/a" CEILING_BATCH1="n/a"; return 0; }
  echo "$out" | grep -v '^RESULT' | sed 's/^/  ceiling: /'
  CEILING="$(grep '^RESULT ' <<<"$out" | tr ' ' '\n' | sed -n 's/^ceiling=//p')"
  CEILING_BATCH1="$(grep '^RESULT ' <<<"$out" | tr ' ' '\n' | sed -n 's/^batch1=//p')"
}

delete_bench_topology() { # delete_bench_topology deja.bench.<id>: that queue/exchange and its <id>.*
  local prefix="$1" kind name
  case "$prefix" in deja.bench.?*) ;; *) warn "refusing to delete queues named $prefix*"; return 1 ;; esac
  for kind in queues exchanges; do
    # <id> itself and <id>.*, not <id>6 (the prefix of concurrency 1 is one of concurrency 16).
    for name in $(curl -s -u "$MGMT_AUTH" "$MGMT/api/$kind/%2F?columns=name" \
        | jq -r --arg p "$prefix" '.[].name | select(. == $p or startswith($p + "."))'); do
      curl -s -o /dev/null -u "$MGMT_AUTH" -X DELETE "$MGMT/api/$kind/%2F/$name"
    done
  done
}
delete_bench_org() { # delete_bench_org bench-ingest-<id>: every node of that org, in batches
  local org="$1" params out deleted
  case "$org" in bench-ingest-?*) ;; *) warn "refusing to delete org $org"; return 1 ;; esac
  params="$(jq -n --arg org "$org" '{org: $org}')"
  # Review records carry no org: those of the org's episodes go first. Then every node whose
  # org it is (Episode, TurnInput, EpisodeTokens, Component, Skill, Strategy, Review...), at
  # most 5000 per statement, until none is left: a plain loop rather than CALL { ... } IN
  # TRANSACTIONS, which needs an implicit transaction (a bench org is small anyway).
  # shellcheck disable=SC2016 # $org is a Cypher parameter
  out="$(cypher 'MATCH (:Episode {org: $org})-[:HAS_REVIEW]->(r:Review) DETACH DELETE r' "$params")" || out=""
  [ "$(jq -r '.errors | length' <<<"$out" 2>/dev/null)" = 0 ] \
    || { warn "deleting the review records of $org failed: ${out:-no answer from $NEO4J_HTTP}"; return 1; }
  while :; do
    # shellcheck disable=SC2016 # $org is a Cypher parameter
    out="$(cypher 'MATCH (n) WHERE n.org = $org WITH n LIMIT 5000 DETACH DELETE n RETURN count(n)' \
      "$params")" || out=""
    deleted="$(jq -r 'if (.errors | length) == 0 then .results[0].data[0].row[0] else empty end' \
      <<<"$out" 2>/dev/null || true)"
    [ -n "$deleted" ] || { warn "deleting the nodes of $org failed: ${out:-no answer from $NEO4J_HTTP}"; return 1; }
    [ "$deleted" -gt 0 ] || return 0
  done
}

run_config() { # run_config LATENCY_MS CONCURRENCY TURNS
  local latency="$1" conc="$2" turns="$3"
  local id="$RUN_ID-l$latency-c$conc" convs=$(( (turns + 3) / 4 ))
  local org="bench-ingest-$id" queue="deja.bench.$id"
  CUR_QUEUE="$queue" CUR_ORG="$org"
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

  local t0 t1 text processed=0 dead=0 timed_out=0
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
      echo "timeout after ${TIMEOUT_SECS}s: processed $processed dead $dead of $turns" >&2
      timed_out=1; break
    fi
    sleep 0.1
  done
  t1="$(date +%s%N)"
  local load1
  load1="$(cut -d' ' -f1 /proc/loadavg)"
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
  local synth batch_calls batch_texts
  synth="$(metric_sum "$text" deja_llm_requests_total 'kind="synthesize"')"
  # Model calls of the micro-batcher and the texts they embedded (absent when it is off).
  batch_calls="$(metric_sum "$text" deja_embed_batch_texts_count)"
  batch_texts="$(metric_sum "$text" deja_embed_batch_texts_sum)"

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
  measure_ceiling "$org"

  awk -v lat="$latency" -v conc="$conc" -v turns="$turns" -v ns="$((t1 - t0))" \
      -v calls="$calls" -v ptok="$ptok" -v ctok="$ctok" -v hwm="$hwm" -v idle="$rss_idle" \
      -v retried="$retried" -v dead="$dead" -v fail="$failures" -v eps="$episodes" \
      -v tsum="$turn_sum" -v depth="$depth" -v synth="$synth" -v processed="$processed" \
      -v ticks="$((cpu1 - cpu0))" -v hz="$(getconf CLK_TCK)" \
      -v bcalls="$batch_calls" -v btexts="$batch_texts" -v ceiling="$CEILING" \
      -v ceiling1="$CEILING_BATCH1" -v load="$load1" -v timed_out="$timed_out" \
      -v window="${DEJA__EMBEDDING__BATCH_WINDOW_MS:-default}" \
      -v maxb="${DEJA__EMBEDDING__MAX_BATCH:-default}" \
      -v link="${DEJA__WORKER__LINK_RECURRENCES:-default}" 'BEGIN {
    s = ns / 1e9
    # Rates over the turns that ended (processed or dead-lettered): fewer than asked for when
    # the run stopped on its timeout.
    ended = processed + dead; n = ended > 0 ? ended : 1
    mean_batch = bcalls > 0 ? sprintf("%.2f", btexts / bcalls) : "1"
    ratio = ceiling + 0 > 0 ? sprintf("%.2f", ended / s / ceiling) : "n/a"
    printf "RESULT latency_ms=%d concurrency=%d turns=%d processed=%d timeout=%d seconds=%.2f turns_per_s=%.2f llm_calls_per_turn=%.2f prompt_tokens_per_turn=%.0f completion_tokens_per_turn=%.0f synth_calls=%d retried=%d dead_lettered=%d failed_extractions=%d episodes=%d turns_stored=%d queue_depth=%d worker_cpu_ms_per_turn=%.1f worker_rss_idle_mib=%.1f worker_peak_rss_mib=%.1f batch_window_ms=%s max_batch=%s link_recurrences=%s mean_batch=%s ceiling_batch1_texts_per_s=%s ceiling_texts_per_s=%s ingest_over_ceiling=%s load_avg_1m=%s\n",
      lat, conc, turns, processed, timed_out, s, ended / s, calls / n, ptok / n, ctok / n, synth,
      retried, dead, fail, eps, tsum, depth, ticks * 1000 / hz / n, idle / 1024, hwm / 1024,
      window, maxb, link, mean_batch, ceiling1, ceiling, ratio, load
  }'
  [ "$depth" = 0 ] && [ "$turn_sum" = "$turns" ] \
    || echo "WARNING: $org: queue depth $depth, $turn_sum of $turns turns stored" >&2

  if [ "${DEJA_BENCH_KEEP:-0}" != 1 ]; then
    delete_bench_topology "$queue"
    delete_bench_org "$org" || warn "org $org is left in Neo4j"
  fi
  CUR_QUEUE="" CUR_ORG=""
}

echo "ingest bench $RUN_ID: configs (latency_ms:concurrency:turns) $CONFIGS"
echo "logs and generated turns in $WORK"
for config in $CONFIGS; do
  IFS=: read -r latency conc turns <<<"$config"
  run_config "$latency" "$conc" "$turns"
done
