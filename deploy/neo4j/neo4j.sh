#!/usr/bin/env bash
# Runs a real Neo4j Community server (jars from Maven Central, see pom.xml): the 2026.08
# calendar release on Java 21+ by default, or 5.26 LTS on Java 17+ (NEO4J_SERIES=5.26, and the
# default on a machine without Java 21).
#
#   deploy/neo4j/neo4j.sh start|stop|restart|status|check|classpath|admin ARGS...|logs
#   NEO4J_SERIES=5.26 NEO4J_BOLT_PORT=7688 NEO4J_HTTP_PORT=7475 deploy/neo4j/neo4j.sh start
#                                          # a 5.26 server beside a running 2026.08 one
#
# Env (defaults):
#   NEO4J_SERIES      2026 with Java 21+,  2026 | 5.26 (pom.xml profile neo4j-2026 for 2026)
#                     else 5.26
#   DEJA_NEO4J_HOME   $REPO/.deja/neo4j   conf/, data/, logs/, run/, lib/classpath.txt
#                     ($REPO/.deja/neo4j-2026 for NEO4J_SERIES=2026: a store is never
#                     upgraded in place by switching the series)
#   NEO4J_JAVA_HOME   (searched)           a JDK of the series' minimum version (17 / 21)
#   NEO4J_BOLT_PORT   7687
#   NEO4J_HTTP_PORT   7474                 (also serves Neo4j Browser at /browser/)
#   NEO4J_LISTEN      127.0.0.1
#   NEO4J_ADVERTISED  the listen address; for 0.0.0.0, this machine's name (hostname -f)
#   NEO4J_USER        neo4j
#   NEO4J_PASSWORD    deja-dev-password    (set offline before the first start)
#   NEO4J_HEAP        512m                 (-Xmx; -Xms is min(256m, heap))
#   NEO4J_PAGECACHE   256m
#   NEO4J_START_TIMEOUT 120  NEO4J_STOP_TIMEOUT 60   (seconds)
# Extra neo4j.conf lines can be put in $DEJA_NEO4J_HOME/conf/extra.conf.
set -euo pipefail

DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC2034 # used by lib.sh
LOG_TAG=neo4j
# shellcheck source=SCRIPTDIR/../lib.sh
. "$DEPLOY_DIR/lib.sh"

NEO4J_DIR="$DEPLOY_DIR/neo4j"
SERIES="${NEO4J_SERIES:-$(default_neo4j_series)}"
case "$SERIES" in
  5.26) MAVEN_PROFILE=""; JAVA_MIN=17; MAIN_CLASS=org.neo4j.server.CommunityEntryPoint
        DEFAULT_HOME="$DEJA_DIR/neo4j"; QUIET_PERIOD_SETTING=netty_server_shutdown_quiet_period=0 ;;
  2026) MAVEN_PROFILE=neo4j-2026; JAVA_MIN=21; MAIN_CLASS=org.neo4j.server.Neo4jCommunity
        DEFAULT_HOME="$DEJA_DIR/neo4j-2026"
        QUIET_PERIOD_SETTING=netty_server_shutdown_quiet_period_duration=0s ;;
  *) die "NEO4J_SERIES=$SERIES: expected 5.26 or 2026" ;;
esac
N4_HOME="${DEJA_NEO4J_HOME:-$DEFAULT_HOME}"
BOLT_PORT="${NEO4J_BOLT_PORT:-7687}"
HTTP_PORT="${NEO4J_HTTP_PORT:-7474}"
LISTEN="${NEO4J_LISTEN:-127.0.0.1}"
N4_USER="${NEO4J_USER:-neo4j}"
N4_PASSWORD="${NEO4J_PASSWORD:-deja-dev-password}"
HEAP="${NEO4J_HEAP:-512m}"
PAGECACHE="${NEO4J_PAGECACHE:-256m}"
START_TIMEOUT="${NEO4J_START_TIMEOUT:-120}"
STOP_TIMEOUT="${NEO4J_STOP_TIMEOUT:-60}"

CONF_DIR="$N4_HOME/conf"
DATA_DIR="$N4_HOME/data"
LOGS_DIR="$N4_HOME/logs"
RUN_DIR="$N4_HOME/run"
LIB_DIR="$N4_HOME/lib"
CP_FILE="$LIB_DIR/classpath.txt"
POM_STAMP="$LIB_DIR/pom.sha256"
PID_FILE="$RUN_DIR/deja-neo4j.pid"
CONSOLE_LOG="$LOGS_DIR/console.log"
CDS_ARCHIVE="$LIB_DIR/neo4j-cds.jsa"

# Client-side host for checks: a wildcard listen address is reached via loopback.
case "$LISTEN" in 0.0.0.0|::|'[::]') CHECK_HOST=127.0.0.1 ;; *) CHECK_HOST="$LISTEN" ;; esac
# What the server tells clients to connect to (Neo4j Browser's Bolt address, a neo4j://
# routing table): the listen address, or for a wildcard one the machine's name, which other
# machines can reach (127.0.0.1 would send them to themselves).
case "$LISTEN" in
  0.0.0.0|::|'[::]') ADVERTISED="${NEO4J_ADVERTISED:-$(hostname -f 2>/dev/null || hostname)}" ;;
  *) ADVERTISED="${NEO4J_ADVERTISED:-$LISTEN}" ;;
esac
HTTP_URL="http://$CHECK_HOST:$HTTP_PORT"

# ---------------------------------------------------------------- java
# The java binary of this series (JAVA); 5.26 keeps the Debian JDK 17 it always used.
select_java() {
  [ -n "${JAVA:-}" ] && return 0
  if [ "$JAVA_MIN" = 17 ]; then ensure_java; fi
  JAVA="$(find_java "$JAVA_MIN")" \
    || die "Neo4j $SERIES needs Java $JAVA_MIN+; none found (set NEO4J_JAVA_HOME to a JDK)"
}

# ---------------------------------------------------------------- classpath
# The classpath is cached per pom.xml content and series.
pom_stamp() { echo "$(sha256sum "$NEO4J_DIR/pom.xml" | cut -d' ' -f1) $SERIES"; }

classpath_ok() {
  [ -s "$CP_FILE" ] && [ -f "$POM_STAMP" ] || return 1
  [ "$(cat "$POM_STAMP")" = "$(pom_stamp)" ] || return 1
  local jar
  local IFS=:
  # shellcheck disable=SC2013
  for jar in $(cat "$CP_FILE"); do [ -f "$jar" ] || return 1; done
}

resolve_classpath() {
  if classpath_ok; then return 0; fi
  select_java
  ensure_maven
  mkdir -p "$LIB_DIR" "$LOGS_DIR"
  log "resolving Neo4j jars with Maven (first time only; needs Maven Central) ..."
  local t0; t0=$(now_ms)
  if ! timeout 900 mvn -q -B -f "$NEO4J_DIR/pom.xml" ${MAVEN_PROFILE:+-P "$MAVEN_PROFILE"} dependency:build-classpath \
      -Dmdep.outputFile="$CP_FILE.tmp" >"$LOGS_DIR/maven.log" 2>&1 </dev/null; then
    tail -n 30 "$LOGS_DIR/maven.log" >&2 || true
    die "maven failed to resolve the Neo4j classpath; see $LOGS_DIR/maven.log"
  fi
  mv "$CP_FILE.tmp" "$CP_FILE"
  pom_stamp >"$POM_STAMP"
  rm -f "$CDS_ARCHIVE"
  log "classpath cached in $CP_FILE ($(( ($(now_ms) - t0) / 1000 ))s)"
}

# ---------------------------------------------------------------- config / auth
write_conf() {
  mkdir -p "$CONF_DIR" "$DATA_DIR" "$LOGS_DIR" "$RUN_DIR" "$N4_HOME/plugins" "$N4_HOME/import"
  cat >"$CONF_DIR/neo4j.conf.tmp" <<EOF
# Generated by deploy/neo4j/neo4j.sh on every start; edit conf/extra.conf instead.
server.directories.data=$DATA_DIR
server.directories.logs=$LOGS_DIR
server.directories.run=$RUN_DIR
server.directories.plugins=$N4_HOME/plugins
server.directories.import=$N4_HOME/import
server.default_listen_address=$LISTEN
server.default_advertised_address=$ADVERTISED
server.bolt.enabled=true
server.bolt.listen_address=:$BOLT_PORT
server.bolt.advertised_address=:$BOLT_PORT
server.http.enabled=true
server.http.listen_address=:$HTTP_PORT
server.http.advertised_address=:$HTTP_PORT
server.https.enabled=false
server.memory.heap.max_size=$HEAP
server.memory.pagecache.size=$PAGECACHE
dbms.security.auth_enabled=true
dbms.usage_report.enabled=false
# Make 'stop' fast: Bolt's Netty event loops otherwise idle 5 s (twice) before exiting.
internal.dbms.bolt.$QUIET_PERIOD_SETTING
internal.dbms.bolt.netty_server_shutdown_timeout=3s
EOF
  if [ -f "$CONF_DIR/extra.conf" ]; then
    { echo "# --- from conf/extra.conf"; cat "$CONF_DIR/extra.conf"; } >>"$CONF_DIR/neo4j.conf.tmp"
  fi
  mv "$CONF_DIR/neo4j.conf.tmp" "$CONF_DIR/neo4j.conf"
}

admin_tool() {
  NEO4J_HOME="$N4_HOME" NEO4J_CONF="$CONF_DIR" \
    "$JAVA" -Xmx256m -cp "$(cat "$CP_FILE")" org.neo4j.cli.AdminTool "$@"
}

# The initial password can only be set before the system database exists.
set_initial_password() {
  if [ -d "$DATA_DIR/databases/system" ]; then return 0; fi
  log "setting initial password for user 'neo4j' (offline, before first start)"
  admin_tool dbms set-initial-password "$N4_PASSWORD" >"$LOGS_DIR/set-initial-password.log" 2>&1 </dev/null \
    || { cat "$LOGS_DIR/set-initial-password.log" >&2; die "set-initial-password failed (password must be >= 8 chars); see $LOGS_DIR/set-initial-password.log"; }
}

# ---------------------------------------------------------------- process
read_pid() { cat "$PID_FILE" 2>/dev/null || true; }
running() { pid_alive "$(read_pid)" "$MAIN_CLASS"; }

cypher() { # cypher DB STATEMENT [NAME VALUE]... -> raw JSON response (HTTP transactional endpoint)
  local db="$1" stmt="$2" body
  shift 2
  # JSON built by python, values passed as Cypher parameters: a password with a quote or a
  # backslash is neither broken JSON nor Cypher.
  body="$(python3 -c 'import json, sys
a = sys.argv[2:]
print(json.dumps({"statements": [{"statement": sys.argv[1], "parameters": dict(zip(a[::2], a[1::2]))}]}))' "$stmt" "$@")"
  curl -sS -m 10 -u "${CY_USER:-$N4_USER}:$N4_PASSWORD" -H 'Content-Type: application/json' -H 'Accept: application/json' \
    -d "$body" "$HTTP_URL/db/$db/tx/commit"
}

http_up() { curl -sf -m 3 -o /dev/null "$HTTP_URL/"; }
ready() { http_up && bolt_handshake "$CHECK_HOST" "$BOLT_PORT" >/dev/null; }

# Real requests: Cypher RETURN 1 over HTTP with auth + Bolt handshake on the Bolt port.
check() {
  local out bolt
  out="$(cypher neo4j 'RETURN 1 AS ok' 2>&1)" || { warn "HTTP request to $HTTP_URL failed: $out"; return 1; }
  case "$out" in
    *'"row":[1]'*) ;;
    *Unauthorized*|*AuthenticationRateLimit*)
      warn "Neo4j rejected $N4_USER/<NEO4J_PASSWORD>: $out"
      warn "the data dir $DATA_DIR was initialised with another password; use that one, or stop and delete $DATA_DIR"
      return 1 ;;
    *) warn "unexpected Cypher response: $out"; return 1 ;;
  esac
  bolt="$(bolt_handshake "$CHECK_HOST" "$BOLT_PORT")" || { warn "Bolt handshake on $CHECK_HOST:$BOLT_PORT failed"; return 1; }
  log "OK: Cypher 'RETURN 1' as $N4_USER via $HTTP_URL; Bolt $bolt handshake on bolt://$CHECK_HOST:$BOLT_PORT"
}

# Community edition: extra users are allowed (all with full rights). Create NEO4J_USER if not 'neo4j'.
ensure_user() {
  [ "$N4_USER" = neo4j ] && return 0
  local out
  out="$(CY_USER=neo4j cypher system \
    'CREATE USER $name IF NOT EXISTS SET PLAINTEXT PASSWORD $password CHANGE NOT REQUIRED' \
    name "$N4_USER" password "$N4_PASSWORD")"
  case "$out" in *'"errors":[]'*) ;; *) warn "could not create user $N4_USER: $out" ;; esac
}

# When the ports are taken by the *other* series' server of this checkout (e.g. a 5.26 server
# started before the default moved to 2026), says which one and how to stop or keep it.
other_series_hint() {
  local other other_home pid
  case "$SERIES" in 2026) other=5.26; other_home="$DEJA_DIR/neo4j" ;; *) other=2026; other_home="$DEJA_DIR/neo4j-2026" ;; esac
  pid="$(cat "$other_home/run/deja-neo4j.pid" 2>/dev/null || true)"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    warn "Neo4j $other of this checkout is running there (pid $pid, home $other_home): stop it with" \
      "'NEO4J_SERIES=$other deploy/neo4j/neo4j.sh stop', or keep using it with NEO4J_SERIES=$other"
  fi
}

start() {
  # Two starts at once (two shells, a test script beside services.sh) go one after the other:
  # the second finds the first's server and waits for it, rather than launching its own.
  hold_lock 9 "$RUN_DIR/start.lock" "$((START_TIMEOUT + 60))" "neo4j.sh start"
  if running; then
    # Alive is not up: a server still booting (an earlier start that timed out) is waited
    # for, as a fresh one is, rather than reported up and failing the caller's next check.
    local pid deadline=$(( $(date +%s) + START_TIMEOUT ))
    pid="$(read_pid)"
    until ready; do
      pid_alive "$pid" || die "Neo4j (pid $pid) exited while starting; read $LOGS_DIR/neo4j.log"
      [ "$(date +%s)" -lt "$deadline" ] \
        || die "Neo4j (pid $pid) runs but does not answer on $HTTP_URL / bolt :$BOLT_PORT after ${START_TIMEOUT}s; '$0 stop', then start again"
      sleep 1
    done
    log "already running (pid $pid); bolt://$CHECK_HOST:$BOLT_PORT $HTTP_URL"
    return 0
  fi
  rm -f "$PID_FILE"
  if tcp_open "$CHECK_HOST" "$BOLT_PORT" || tcp_open "$CHECK_HOST" "$HTTP_PORT"; then
    other_series_hint
    die "port $BOLT_PORT or $HTTP_PORT on $CHECK_HOST is already in use by another process (not ours: no live pid in $PID_FILE)"
  fi
  select_java
  mkdir -p "$LOGS_DIR"
  resolve_classpath
  write_conf
  set_initial_password

  local heap_mb xms jvm_opts=()
  heap_mb=$(numfmt --from=iec "${HEAP^^}" 2>/dev/null || echo 0)
  xms="$HEAP"; [ "$heap_mb" -gt $((256 * 1024 * 1024)) ] && xms=256m
  jvm_opts=(
    "-Xms$xms" "-Xmx$HEAP" -XX:+UseG1GC -XX:-OmitStackTraceInFastThrow -XX:+ExitOnOutOfMemoryError
    -XX:+UnlockExperimentalVMOptions -XX:+TrustFinalNonStaticFields -XX:+DisableExplicitGC
    -Djdk.nio.maxCachedBufferSize=1024 -Dio.netty.tryReflectionSetAccessible=true
    -Djdk.tls.ephemeralDHKeySize=2048 -Djdk.tls.rejectClientInitiatedRenegotiation=true
    -Dlog4j2.disable.jmx=true -Dfile.encoding=UTF-8
    --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED
    --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
  )
  # Java 21+ warns on every start about the native libraries Neo4j loads (JNA).
  if [ "$JAVA_MIN" -ge 21 ]; then jvm_opts+=(--enable-native-access=ALL-UNNAMED); fi
  # Class-data-sharing archive: dumped when the first server exits, reused afterwards
  # (makes restarts noticeably faster). Deleted whenever the classpath changes.
  if [ "${NEO4J_CDS:-1}" = 1 ]; then
    if [ -s "$CDS_ARCHIVE" ]; then
      jvm_opts+=("-XX:SharedArchiveFile=$CDS_ARCHIVE")
    else
      jvm_opts+=("-XX:ArchiveClassesAtExit=$CDS_ARCHIVE")
    fi
  fi

  log "starting Neo4j $SERIES on Java $(java_major "$JAVA") (home $N4_HOME, heap $HEAP, pagecache $PAGECACHE)"
  {
    echo "===== $(date -u +%FT%TZ) start"
  } >>"$CONSOLE_LOG"
  local pid t0; t0=$(now_ms)
  NEO4J_HOME="$N4_HOME" NEO4J_CONF="$CONF_DIR" nohup setsid "$JAVA" "${jvm_opts[@]}" \
    -cp "$(cat "$CP_FILE")" "$MAIN_CLASS" --home-dir="$N4_HOME" --config-dir="$CONF_DIR" \
    >>"$CONSOLE_LOG" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"

  local deadline=$(( $(date +%s) + START_TIMEOUT ))
  until ready; do
    if ! pid_alive "$pid"; then
      rm -f "$PID_FILE"
      tail -n 40 "$CONSOLE_LOG" >&2 || true
      tail -n 20 "$LOGS_DIR/neo4j.log" >&2 2>/dev/null || true
      die "Neo4j exited during startup; read $LOGS_DIR/neo4j.log, $LOGS_DIR/debug.log and $CONSOLE_LOG"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      tail -n 20 "$LOGS_DIR/neo4j.log" >&2 2>/dev/null || true
      die "Neo4j (pid $pid) not answering on $HTTP_URL / bolt :$BOLT_PORT after ${START_TIMEOUT}s; read $LOGS_DIR/neo4j.log and $LOGS_DIR/debug.log (still running; '$0 stop' to kill it)"
    fi
    sleep 0.25
  done
  ensure_user
  log "started (pid $pid) in $(( ($(now_ms) - t0) / 1000 )).$(( ($(now_ms) - t0) % 1000 / 100 ))s: bolt://$CHECK_HOST:$BOLT_PORT  $HTTP_URL/browser/"
}

stop() {
  # Not while a start runs: its pid file would be removed under it, orphaning its server.
  hold_lock 9 "$RUN_DIR/start.lock" "$((START_TIMEOUT + 60))" "neo4j.sh start"
  stop_pid_file "$PID_FILE" "$MAIN_CLASS" "$STOP_TIMEOUT" " (next start will run recovery)"
}

status() {
  if running; then
    if ready; then
      log "running (pid $(read_pid)); bolt://$CHECK_HOST:$BOLT_PORT  $HTTP_URL/browser/  home $N4_HOME"
    else
      log "process running (pid $(read_pid)) but not answering yet on $HTTP_URL / bolt :$BOLT_PORT"
      return 1
    fi
  else
    log "stopped (home $N4_HOME)"
    return 3
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) status ;;
  check) check ;;
  classpath) resolve_classpath; log "classpath: $CP_FILE" ;;
  admin) shift; select_java; resolve_classpath; write_conf; admin_tool "$@" ;;
  logs) echo "$LOGS_DIR"; ls -1 "$LOGS_DIR" 2>/dev/null ;;
  *) echo "usage: $0 start|stop|restart|status|check|classpath|admin ARGS...|logs" >&2; exit 2 ;;
esac
