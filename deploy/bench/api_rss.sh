#!/usr/bin/env bash
# API memory benchmark: peak RSS of the release `deja serve --dev` process under a burst of
# HTTP searches (POST /v1/memory/search), half scoped to one team and half org-wide, against a
# search-bench org (seeded by crates/deja-api/examples/search_bench.rs). Also prints the HTTP
# latency percentiles seen by the client (the embedding of each query included), and the CPU
# one search costs the API, Neo4j and the client: with C clients on N cores, a search cannot
# take less, on average, than that CPU x C / min(C, N) — the floor the latency is set against.
#
#   deploy/bench/api_rss.sh                      # 500 searches, 4 clients, bench-search-v1-10000
#   API_SEARCHES=200 API_CLIENTS=8 API_ORG=bench-search-v1-1000 deploy/bench/api_rss.sh
#
# The API runs with a unique queue/exchange prefix (deja.bench.<id>.api) so that the synthesis
# jobs qualifying searches enqueue never reach the default queues; they are deleted afterwards.
# Runs `deja migrate` first (idempotent). Fails when /readyz never answers 200 within 60 s, and
# when the searches find nothing (episodes_per_answer=0), which measures nothing: most likely
# API_ORG is empty because the search bench has not seeded it yet (run it first:
# DEJA_BENCH_ONLY="search api" deploy/bench.sh).
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DEPLOY_DIR="$(cd "$BENCH_DIR/.." && pwd)"
# shellcheck source=SCRIPTDIR/../lib.sh
. "$DEPLOY_DIR/lib.sh"
command -v jq >/dev/null 2>&1 || apt_install jq
DEJA_BIN="${DEJA_BIN:-$TARGET_DIR/release/deja}"
MGMT="${RABBITMQ_MGMT_URL:-http://127.0.0.1:${RABBITMQ_MGMT_PORT:-15672}}"
MGMT_AUTH="${RABBITMQ_MGMT_AUTH:-guest:guest}"
SEARCHES="${API_SEARCHES:-500}"
CLIENTS="${API_CLIENTS:-4}"
ORG="${API_ORG:-bench-search-v1-10000}"

[ -x "$DEJA_BIN" ] || { echo "missing $DEJA_BIN: cargo build --release -p deja-cli" >&2; exit 1; }
eval "$("$REPO/deploy/services.sh" env)"
eval "$("$REPO/deploy/embeddings.sh" env)"
export DEJA__LOG__FORMAT=json DEJA__LOG__FILTER="${API_LOG_FILTER:-warn}"
DEJA__LOG__FILTER=error "$DEJA_BIN" migrate || die "deja migrate failed"

RUN_ID="${API_RUN_ID:-$(date +%Y%m%d%H%M%S)-$$}"
PREFIX="deja.bench.$RUN_ID.api"
WORK="$REPO/.deja/bench/api-$RUN_ID"
mkdir -p "$WORK"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"

API_PID=""
cleanup() {
  if [ -n "$API_PID" ] && kill -0 "$API_PID" 2>/dev/null; then
    kill -TERM "$API_PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$API_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$API_PID" 2>/dev/null || true
  fi
  local name kind
  for kind in queues exchanges; do
    for name in $(curl -s -u "$MGMT_AUTH" "$MGMT/api/$kind/%2F?columns=name" \
        | jq -r --arg p "$PREFIX" '.[].name | select(startswith($p))' 2>/dev/null); do
      curl -s -o /dev/null -u "$MGMT_AUTH" -X DELETE "$MGMT/api/$kind/%2F/$name"
    done
  done
}
trap cleanup EXIT

DEJA__RABBITMQ__NAME_PREFIX="$PREFIX" DEJA__RABBITMQ__EXCHANGE="$PREFIX.turns" \
DEJA__SEARCH__DEADLINE_MS=60000 \
  "$DEJA_BIN" serve --dev --bind "127.0.0.1:$PORT" >"$WORK/api.log" 2>&1 &
API_PID=$!
ready=0
for _ in $(seq 600); do
  if curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null; then ready=1; break; fi
  kill -0 "$API_PID" 2>/dev/null || { tail -5 "$WORK/api.log" >&2; die "deja serve exited; see $WORK/api.log"; }
  sleep 0.1
done
if [ "$ready" != 1 ]; then
  tail -5 "$WORK/api.log" >&2
  die "/readyz on 127.0.0.1:$PORT never answered 200 within 60 s; see $WORK/api.log"
fi
rss_idle="$(awk '/^VmRSS/ {print $2}' "/proc/$API_PID/status")"
# CPU seconds (user + system) a process has used so far; 0 when it is not there.
cpu_secs() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo 0; }
NEO4J_PID="$(ss -ltnpH "sport = :${NEO4J_BOLT_PORT:-7687}" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)"
api_cpu0="$(cpu_secs "$API_PID")" neo4j_cpu0="$(cpu_secs "${NEO4J_PID:-0}")"

load="$(python3 - "$PORT" "$ORG" "$SEARCHES" "$CLIENTS" <<'EOF'
import json, resource, sys, time, urllib.request
from concurrent.futures import ThreadPoolExecutor
port, org, searches, clients = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
symptoms = ["pods OOMKilled with exit code 137", "spike of HTTP 500 errors", "p99 latency tripled",
            "TLS handshake fails, certificate expired", "database connection pool exhausted",
            "disk full, writes failing", "consumer lag growing", "deadlock detected",
            "DNS resolution failures", "CrashLoopBackOff after deploy", "replica lag high",
            "429 Too Many Requests", "cache hit ratio collapsed", "nightly cron did not run"]
components = ["checkout", "payments-gateway", "orders-api", "search-indexer", "auth-service",
              "inventory-db", "kafka-events", "redis-sessions", "postgres-main", "jenkins"]
systems = ["kubernetes", "production", "Jenkins", "AWS", "on-call"]
def one(i):
    body = {"org": org, "limit": 3,
            "query": f"{symptoms[i % len(symptoms)]} {components[(i * 3) % len(components)]} "
                     f"{systems[i % len(systems)]} #{i}"}
    if i % 2 == 0:
        body["team"] = f"team-{i % 10}"
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/memory/search",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as resp:
        payload = json.load(resp)
    result = payload.get("result") or {}
    return (time.perf_counter() - start, bool(payload.get("success")),
            len(result.get("episodes", [])))
start = time.perf_counter()
with ThreadPoolExecutor(clients) as pool:
    results = list(pool.map(one, range(searches)))
wall = time.perf_counter() - start
times = sorted(r[0] for r in results)
pct = lambda p: times[min(len(times) - 1, round((len(times) - 1) * p))] * 1000
ok = sum(r[1] for r in results)
found = sum(r[2] for r in results) / len(results)
usage = resource.getrusage(resource.RUSAGE_SELF)
client_cpu_ms = (usage.ru_utime + usage.ru_stime) * 1000 / searches
print(f"searches={searches} clients={clients} ok={ok} episodes_per_answer={found:.2f} wall_s={wall:.2f} searches_per_s={searches / wall:.1f} "
      f"http_p50_ms={pct(0.5):.1f} http_p95_ms={pct(0.95):.1f} http_p99_ms={pct(0.99):.1f} client_cpu_ms_per_search={client_cpu_ms:.1f}")
EOF
)"
api_cpu1="$(cpu_secs "$API_PID")" neo4j_cpu1="$(cpu_secs "${NEO4J_PID:-0}")"
found="$(tr ' ' '\n' <<<"$load" | sed -n 's/^episodes_per_answer=//p')"
if awk -v f="${found:-0}" 'BEGIN { exit !(f + 0 == 0) }'; then
  echo "$load" >&2
  die "no search found any episode of org $ORG (episodes_per_answer=0): most likely it is empty because the search bench has not seeded it; run the search bench first (crates/deja-api/examples/search_bench.rs: DEJA_BENCH_ONLY=\"search api\" deploy/bench.sh). Else see ok= above and $WORK/api.log"
fi
hwm="$(awk '/^VmHWM/ {print $2}' "/proc/$API_PID/status")"
rss="$(awk '/^VmRSS/ {print $2}' "/proc/$API_PID/status")"
awk -v org="$ORG" -v load="$load" -v idle="$rss_idle" -v hwm="$hwm" -v rss="$rss" \
    -v n="$SEARCHES" -v clients="$CLIENTS" -v cores="$(nproc)" \
    -v api="$(awk -v a="$api_cpu0" -v b="$api_cpu1" 'BEGIN { print b - a }')" \
    -v neo="$(awk -v a="$neo4j_cpu0" -v b="$neo4j_cpu1" 'BEGIN { print b - a }')" 'BEGIN {
  match(load, /client_cpu_ms_per_search=[0-9.]+/)
  client = substr(load, RSTART + 25, RLENGTH - 25) + 0
  api_ms = api * 1000 / n; neo_ms = neo * 1000 / n; total = api_ms + neo_ms + client
  floor = total * clients / (clients < cores ? clients : cores)
  printf "RESULT org=%s %s api_cpu_ms_per_search=%.1f neo4j_cpu_ms_per_search=%.1f cpu_ms_per_search=%.1f cpu_latency_floor_ms=%.1f api_rss_idle_mib=%.1f api_rss_after_mib=%.1f api_peak_rss_mib=%.1f\n",
    org, load, api_ms, neo_ms, total, floor, idle / 1024, rss / 1024, hwm / 1024 }'
