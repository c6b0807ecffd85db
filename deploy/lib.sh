# shellcheck shell=bash
# Shared helpers for the deploy/ scripts. Sourced, never executed.
# shellcheck disable=SC2016 # bash -c '...' snippets get their args as $0 $1 on purpose
# Callers must set: DEPLOY_DIR (absolute path of deploy/), and use `set -euo pipefail`.

REPO="${REPO:-$(cd "$DEPLOY_DIR/.." && pwd)}"
DEJA_DIR="${DEJA_DIR:-$REPO/.deja}"
# Where cargo puts what the scripts build: CARGO_TARGET_DIR when set (a relative one is taken
# from the repository, where the scripts run cargo), else target/ in the repository.
case "${CARGO_TARGET_DIR:-}" in
  "") TARGET_DIR="$REPO/target" ;;
  /*) TARGET_DIR="$CARGO_TARGET_DIR" ;;
  *) TARGET_DIR="$REPO/$CARGO_TARGET_DIR" ;;
esac
export DEBIAN_FRONTEND=noninteractive

log() { printf '[%s] %s\n' "${LOG_TAG:-deja}" "$*"; }
warn() { printf '[%s] WARNING: %s\n' "${LOG_TAG:-deja}" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "${LOG_TAG:-deja}" "$*" >&2; exit 1; }

# hold_lock FD FILE SECS WHAT: an exclusive lock on FILE, held until the script exits, so two
# runs of one step (two starts of one server) go one after the other. A server started under
# it must be started with FD closed (`FD>&-`), or it holds the lock for its whole life.
hold_lock() {
  local fd="$1" file="$2" waitsecs="$3" what="$4"
  command -v flock >/dev/null 2>&1 || return 0
  mkdir -p "$(dirname "$file")"
  eval "exec $fd>\"\$file\""
  flock -w "$waitsecs" "$fd" || die "another '$what' holds $file for more than ${waitsecs}s"
}

# Milliseconds since the epoch (for timings).
now_ms() { date +%s%3N; }

# apt-get update runs at most once per process tree (marker in env). Progress goes to stderr:
# helpers that install on demand are called inside $(...) (python_bin in embeddings.sh and
# llm.sh), whose stdout must be the answer alone.
apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install manually: $*"
  [ "$(id -u)" = 0 ] || die "need root to apt-get install $*"
  mkdir -p "$DEJA_DIR"
  local apt_log="$DEJA_DIR/apt.log"
  if [ -z "${DEJA_APT_UPDATED:-}" ]; then
    log "apt-get update (output in $apt_log)" >&2
    # Wait for a lock another apt holds (unattended-upgrades right after a VM boots) rather
    # than fail at once.
    timeout 600 apt-get -o DPkg::Lock::Timeout=300 update </dev/null >>"$apt_log" 2>&1 \
      || { tail -n 20 "$apt_log" >&2; die "apt-get update failed; see $apt_log"; }
    export DEJA_APT_UPDATED=1
  fi
  log "apt-get install -y $* (output in $apt_log)" >&2
  timeout 1200 apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "$@" \
    </dev/null >>"$apt_log" 2>&1 \
    || { tail -n 20 "$apt_log" >&2; die "apt-get install $* failed; see $apt_log"; }
}

# Java 17+ (Neo4j 5.26 supports 17 and 21). Installs openjdk-17-jre-headless when missing.
ensure_java() {
  if ! command -v java >/dev/null 2>&1; then
    apt_install openjdk-17-jre-headless
  fi
  local v
  v="$(java_major java)"
  [ "${v:-0}" -ge 17 ] || die "java $v on PATH is too old; Neo4j 5.26 needs Java 17 or 21 (set JAVA_HOME/PATH)"
}

# java_major JAVA_BIN: the feature version (17, 21, 25...) of that java, or nothing.
java_major() {
  "$1" -version 2>&1 | awk -F'"' '/version/ { split($2, v, "."); print (v[1] == 1 ? v[2] : v[1]); exit }'
}

# find_java MIN_MAJOR: prints the path of a java binary of at least that version, trying
# $NEO4J_JAVA_HOME, $JAVA_HOME, java on PATH, then every JDK under /usr/lib/jvm (newest
# first). Neo4j 2026.x needs Java 21+; Debian 12 packages none, so CI machines carry a
# Temurin JDK there (25 at the time of writing).
find_java() {
  local min="$1" candidate v
  for candidate in ${NEO4J_JAVA_HOME:+"$NEO4J_JAVA_HOME/bin/java"} ${JAVA_HOME:+"$JAVA_HOME/bin/java"} \
      "$(command -v java 2>/dev/null || true)" $(ls -d /usr/lib/jvm/*/bin/java 2>/dev/null | sort -rV); do
    [ -x "$candidate" ] || continue
    v="$(java_major "$candidate")"
    if [ "${v:-0}" -ge "$min" ]; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

# default_neo4j_series: the Neo4j series the scripts run when NEO4J_SERIES is unset. 2026
# (the 2026.08 calendar release, whose vector index filters by org and team itself: 6x faster
# team searches at 100k episodes, docs/BENCHMARKS.md) where a Java 21+ is found; else 5.26
# LTS on the Java 17 apt installs (Debian 12 packages no JDK 21). One deja binary serves both.
default_neo4j_series() {
  if find_java 21 >/dev/null; then echo 2026; else echo 5.26; fi
}

ensure_maven() {
  command -v mvn >/dev/null 2>&1 || apt_install maven
}

# A C/C++ compiler and linker for cargo: aws-lc-sys, ring, onig_sys and esaxx-rs compile C and
# C++ in their build scripts, and rustc links through cc. Nothing needs pkg-config or OpenSSL
# headers (no openssl-sys in Cargo.lock; the pkg-config probes of aws-lc-sys and onig_sys are
# optional and fall back to the bundled sources).
ensure_c_toolchain() {
  if ! command -v cc >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1; then
    apt_install build-essential
  fi
}

# tcp_open HOST PORT: true when something accepts a TCP connection (2 s bound).
tcp_open() {
  timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}

# Real Bolt handshake: magic 0x6060B017 + proposals (5.8..5.0, 4.4..4.0); server must
# answer with a non-zero 4-byte version. Prints the agreed version (e.g. 5.8).
bolt_handshake() {
  local host="$1" port="$2" reply
  reply="$(timeout 5 bash -c '
    exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "\x60\x60\xb0\x17\x00\x08\x08\x05\x00\x04\x04\x04\x00\x00\x00\x00\x00\x00\x00\x00" >&3
    head -c 4 <&3 | od -An -tx1 | tr -d " \n"
  ' "$host" "$port" 2>/dev/null)" || return 1
  [ "${#reply}" = 8 ] && [ "$reply" != 00000000 ] || return 1
  printf '%d.%d\n' "0x${reply:6:2}" "0x${reply:4:2}"
}

# Real AMQP 0-9-1 handshake: send the protocol header, expect a Connection.Start method
# frame (type 1, channel 0, class 10, method 10).
amqp_handshake() {
  local host="$1" port="$2" reply
  reply="$(timeout 5 bash -c '
    exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "AMQP\x00\x00\x09\x01" >&3
    head -c 11 <&3 | od -An -tx1 | tr -d " \n"
  ' "$host" "$port" 2>/dev/null)" || return 1
  # bytes: 01 | 0000 (channel) | size(4) | 000a (class 10) 000a (method 10)
  [ "${reply:0:6}" = 010000 ] && [ "${reply:14:8}" = 000a000a ]
}

# wait_until SECONDS DESCRIPTION CMD...: polls CMD every 0.5 s; false on deadline.
wait_until() {
  local secs="$1" what="$2"; shift 2
  local deadline=$(( $(date +%s) + secs ))
  while ! "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      warn "timed out after ${secs}s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
}

# pid_alive PID [CMDLINE_SUBSTRING]: process exists (and its cmdline contains the substring).
pid_alive() {
  local pid="$1" needle="${2:-}"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  [ -z "$needle" ] && return 0
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$needle"
}

# secs_since T0_MS: elapsed time since T0_MS as "S.Ds".
secs_since() { local d=$(( $(now_ms) - $1 )); printf '%d.%ds' $(( d / 1000 )) $(( d % 1000 / 100 )); }

# stop_pid_file PID_FILE MARKER TIMEOUT_SECS [KILL_NOTE]: SIGTERM the process recorded in
# PID_FILE (if it is alive and its command line contains MARKER), wait up to TIMEOUT_SECS,
# then SIGKILL; removes the pid file either way.
stop_pid_file() {
  local pid_file="$1" marker="$2" timeout="$3" kill_note="${4:-}" pid
  pid="$(cat "$pid_file" 2>/dev/null || true)"
  if ! pid_alive "$pid" "$marker"; then
    rm -f "$pid_file"
    log "not running"
    return 0
  fi
  log "stopping (pid $pid, SIGTERM, up to ${timeout}s)"
  local t0; t0=$(now_ms)
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$(( $(date +%s) + timeout ))
  while pid_alive "$pid"; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      warn "still alive after ${timeout}s; sending SIGKILL${kill_note}"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 1
      break
    fi
    sleep 0.1
  done
  rm -f "$pid_file"
  log "stopped in $(secs_since "$t0")"
}
