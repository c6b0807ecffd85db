#!/usr/bin/env bash
# Brings up the real backing services for deja: Neo4j Community and RabbitMQ 3.10.
#
#   deploy/services.sh up|down|status|check|restart-neo4j|restart-rabbitmq|env
#   eval "$(deploy/services.sh env)"   exports DEJA__NEO4J__{URI,USER,PASSWORD}, DEJA__RABBITMQ__URI
#
# `up` installs what is missing (Java 17, Maven, rabbitmq-server, curl, python3 via apt; Neo4j
# jars via Maven), starts both services in parallel, then verifies each with a real request:
#   Neo4j:    Cypher `RETURN 1` over HTTP with NEO4J_USER/NEO4J_PASSWORD + a Bolt handshake
#   RabbitMQ: AMQP 0-9-1 handshake (Connection.Start) + `rabbitmqctl -q status`
# Idempotent; every wait is bounded. See deploy/README.md for env vars.
set -euo pipefail

DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck disable=SC2034 # used by lib.sh
LOG_TAG=services
# shellcheck source=SCRIPTDIR/lib.sh
. "$DEPLOY_DIR/lib.sh"

# The Neo4j series: 2026 (2026.08, Java 21+, vector search filtered inside the index;
# docs/BENCHMARKS.md) where a Java 21+ is found, else 5.26 (LTS, Java 17). Each has its own
# store (.deja/neo4j-2026, .deja/neo4j): switching never upgrades one in place.
SERIES_CHOSEN="${NEO4J_SERIES:+set}"
export NEO4J_SERIES="${NEO4J_SERIES:-$(default_neo4j_series)}"
NEO4J="$DEPLOY_DIR/neo4j/neo4j.sh"
RABBIT="$DEPLOY_DIR/rabbitmq/rabbitmq.sh"
if [ "$NEO4J_SERIES" = 2026 ]; then N4_HOME="${DEJA_NEO4J_HOME:-$DEJA_DIR/neo4j-2026}"
else N4_HOME="${DEJA_NEO4J_HOME:-$DEJA_DIR/neo4j}"; fi
RQ_HOME="${DEJA_RABBITMQ_HOME:-$DEJA_DIR/rabbitmq}"

ensure_prereqs() {
  [ "$(id -u)" = 0 ] || warn "not root: installing packages / running rabbitmq as root will fail"
  local missing=()
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  command -v setsid >/dev/null 2>&1 || missing+=(util-linux)
  # neo4j.sh builds the JSON of its Cypher checks with python3 (`cypher`).
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  [ "${#missing[@]}" = 0 ] || apt_install "${missing[@]}"
  ensure_java
  "$RABBIT" install
  "$NEO4J" classpath   # runs Maven (installing it if needed) only when not cached
}

summary() {
  local nu="${NEO4J_USER:-neo4j}" nl="${NEO4J_LISTEN:-127.0.0.1}" rl="${RABBITMQ_LISTEN:-127.0.0.1}"
  [ "$nl" = 0.0.0.0 ] && nl=127.0.0.1
  [ "$rl" = 0.0.0.0 ] && rl=127.0.0.1
  cat <<EOF
  Neo4j     bolt://$nl:${NEO4J_BOLT_PORT:-7687}  user $nu / password \$NEO4J_PASSWORD (default deja-dev-password)
            browser http://$nl:${NEO4J_HTTP_PORT:-7474}/browser/
            data $N4_HOME/data   logs $N4_HOME/logs (neo4j.log, debug.log, console.log)
  RabbitMQ  amqp://guest:guest@$rl:${RABBITMQ_NODE_PORT:-5672}/%2f   management http://$rl:${RABBITMQ_MGMT_PORT:-15672}/ (guest/guest)
            data $RQ_HOME/mnesia   logs $RQ_HOME/log (${RABBITMQ_NODENAME:-deja@localhost}.log, startup.log)
EOF
}

# Exports for deja's own config (DEJA__SECTION__KEY) pointing at these services.
print_env() {
  local nl="${NEO4J_LISTEN:-127.0.0.1}" rl="${RABBITMQ_LISTEN:-127.0.0.1}"
  [ "$nl" = 0.0.0.0 ] && nl=127.0.0.1
  [ "$rl" = 0.0.0.0 ] && rl=127.0.0.1
  printf 'export DEJA__NEO4J__URI=%q\n' "bolt://$nl:${NEO4J_BOLT_PORT:-7687}"
  printf 'export DEJA__NEO4J__USER=%q\n' "${NEO4J_USER:-neo4j}"
  printf 'export DEJA__NEO4J__PASSWORD=%q\n' "${NEO4J_PASSWORD:-deja-dev-password}"
  printf 'export DEJA__RABBITMQ__URI=%q\n' "amqp://guest:guest@$rl:${RABBITMQ_NODE_PORT:-5672}/%2f"
}

# Says which Neo4j runs when the default picked it, and where older 5.26 data stayed.
series_notice() {
  [ -z "$SERIES_CHOSEN" ] || return 0
  if [ "$NEO4J_SERIES" = 5.26 ]; then
    warn "no Java 21+ found: running Neo4j 5.26 LTS (2026.08 needs Java 21+; set NEO4J_JAVA_HOME" \
      "to one, docs/BENCHMARKS.md says what 5.26 costs at 100k episodes)"
  elif [ ! -d "$N4_HOME/data" ] && [ -d "$DEJA_DIR/neo4j/data" ]; then
    log "Neo4j 2026.08 starts with a new store in $N4_HOME; the 5.26 store in $DEJA_DIR/neo4j" \
      "is kept (NEO4J_SERIES=5.26 keeps using it; deploy/README.md says how to move its data)"
  fi
}

all_healthy() { "$NEO4J" check >/dev/null 2>&1 && "$RABBIT" check >/dev/null 2>&1; }

up() {
  local t0; t0=$(now_ms)
  if "$NEO4J" status >/dev/null 2>&1 && "$RABBIT" status >/dev/null 2>&1 && all_healthy; then
    log "services already up (nothing to do)"
    summary
    return 0
  fi
  ensure_prereqs
  series_notice

  # Start both in parallel (Neo4j output buffered so lines don't interleave).
  local n4out rc_n4=0 rc_rq=0 n4pid
  n4out="$(mktemp)"
  "$NEO4J" start >"$n4out" 2>&1 &
  n4pid=$!
  "$RABBIT" start || rc_rq=$?
  wait "$n4pid" || rc_n4=$?
  cat "$n4out"; rm -f "$n4out"
  [ "$rc_n4" = 0 ] || die "Neo4j failed to start; read $N4_HOME/logs/neo4j.log and $N4_HOME/logs/console.log"
  [ "$rc_rq" = 0 ] || die "RabbitMQ failed to start; read $RQ_HOME/log/${RABBITMQ_NODENAME:-deja@localhost}.log"

  "$NEO4J" check || die "Neo4j is running but the Cypher check failed; read $N4_HOME/logs/neo4j.log"
  "$RABBIT" check || die "RabbitMQ is running but the AMQP check failed; read $RQ_HOME/log/${RABBITMQ_NODENAME:-deja@localhost}.log"
  log "services up in $(( ($(now_ms) - t0) / 1000 )).$(( ($(now_ms) - t0) % 1000 / 100 ))s"
  summary
}

down() {
  local rc=0 n4pid n4out
  n4out="$(mktemp)"
  "$NEO4J" stop >"$n4out" 2>&1 &
  n4pid=$!
  "$RABBIT" stop || rc=1
  wait "$n4pid" || rc=1
  cat "$n4out"; rm -f "$n4out"
  [ "$rc" = 0 ] || die "could not stop everything (see above)"
  log "services down (data kept in $N4_HOME and $RQ_HOME)"
}

status() {
  local rc=0
  "$NEO4J" status || rc=1
  "$RABBIT" status || rc=1
  return "$rc"
}

check() {
  local rc=0
  "$NEO4J" check || rc=1
  "$RABBIT" check || rc=1
  return "$rc"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  check) check ;;
  env) print_env ;;
  restart-neo4j) "$NEO4J" stop; "$NEO4J" start; "$NEO4J" check ;;
  restart-rabbitmq) "$RABBIT" stop; "$RABBIT" start; "$RABBIT" check ;;
  *) echo "usage: $0 up|down|status|check|restart-neo4j|restart-rabbitmq|env" >&2; exit 2 ;;
esac
