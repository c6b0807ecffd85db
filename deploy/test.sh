#!/usr/bin/env bash
# Runs every deja test against real services, setting up what they need first:
#   Neo4j + RabbitMQ (deploy/services.sh up), the embedding model (deploy/embeddings.sh),
#   then `cargo test` for the whole workspace, the disruptive suite and the chaos suite (they
#   stop and restart services, so they run alone, one test at a time).
# Idempotent; safe to run again. `DEJA_LINT=1` also runs rustfmt and clippy (CI does).
set -euo pipefail

DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck disable=SC2034 # used by lib.sh
LOG_TAG="test"
# shellcheck source=SCRIPTDIR/lib.sh
. "$DEPLOY_DIR/lib.sh"
cd "$REPO"

command -v cargo >/dev/null 2>&1 \
  || die "cargo not found: deja needs Rust >= 1.92 (rustup), which this script does not install"
# The tests that run the `deja` binary find it through CARGO_TARGET_DIR from their own
# directory (tests/): a relative value is made absolute, as cargo reads it here.
if [ -n "${CARGO_TARGET_DIR:-}" ]; then export CARGO_TARGET_DIR="$TARGET_DIR"; fi
# A minimal rustup profile has neither rustfmt nor clippy; the lint needs both.
if [ "${DEJA_LINT:-0}" = 1 ] && command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 \
    || warn "rustup could not add rustfmt and clippy; the lint uses what is installed"
fi

"$DEPLOY_DIR/services.sh" up
"$DEPLOY_DIR/embeddings.sh" fetch >/dev/null
# Headless Chromium + chromedriver for the Memory hub's browser test (tests/browser).
"$DEPLOY_DIR/browser.sh" install
eval "$("$DEPLOY_DIR/services.sh" env)"
eval "$("$DEPLOY_DIR/embeddings.sh" env)"
eval "$("$DEPLOY_DIR/browser.sh" env)"

started=$(now_ms)
if [ "${DEJA_LINT:-0}" = 1 ]; then
  log "cargo fmt --check"
  cargo fmt --all -- --check
fi
# The integration tests run the real `deja` binary and the fake LLM server as processes.
log "building binaries"
ensure_c_toolchain
cargo build --locked -p deja-cli -p deja-fake-llm
log "cargo test (unit + integration)"
cargo test --locked --workspace --all-targets
log "cargo test (disruptive: restarts Neo4j and RabbitMQ, one test at a time)"
cargo test --locked -p deja-tests --test disruptive -- --ignored --test-threads=1
cargo test --locked -p deja-bus --test broker_restart -- --ignored --test-threads=1
log "cargo test (chaos: kills workers, stops Neo4j, RabbitMQ and the LLM during one run)"
cargo test --locked -p deja-tests --test chaos -- --ignored --test-threads=1 --nocapture
if [ "${DEJA_LINT:-0}" = 1 ]; then
  log "cargo clippy"
  cargo clippy --locked --workspace --all-targets -- -D warnings
fi
log "all tests passed in $(( ($(now_ms) - started) / 1000 )) s"
