#!/usr/bin/env bash
# Installs headless Chromium and its WebDriver (Debian's `chromium` and `chromium-driver`)
# for the Memory hub's browser test, and prints where they are.
#   deploy/browser.sh install   idempotent; apt-get only when something is missing
#   deploy/browser.sh env       prints DEJA_CHROMEDRIVER=... (eval it before the test)
set -euo pipefail

DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck disable=SC2034 # used by lib.sh
LOG_TAG="browser"
# shellcheck source=SCRIPTDIR/lib.sh
. "$DEPLOY_DIR/lib.sh"

driver_path() { command -v chromedriver 2>/dev/null || echo /usr/bin/chromedriver; }

case "${1:-install}" in
  install)
    if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
      apt_install chromium chromium-driver
    fi
    log "chromium $(chromium --version 2>/dev/null | awk '{print $2}'), driver $(driver_path)"
    ;;
  env)
    echo "export DEJA_CHROMEDRIVER=$(driver_path)"
    ;;
  *)
    die "usage: $0 install|env"
    ;;
esac
