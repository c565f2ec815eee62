#!/usr/bin/env bash
# Sets everything up and runs the whole test suite: lint, unit, integration and acceptance tests
# against a real embedded PostgreSQL, real files and the real local model. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
# the workbench's browser tests drive Debian's Chromium (tests/browser); a CJK font so that the
# 中文 / 한국어 screenshots are legible. Installed only when missing, and only as root (as CI runs).
if ! command -v chromium >/dev/null 2>&1 || ! fc-list 2>/dev/null | grep -qi "wenquanyi\|noto sans cjk"; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-zenhei >/dev/null \
      || echo "could not install chromium: the browser tests will fail" >&2
  fi
fi
.venv/bin/ruff check src tests bench
set +e
.venv/bin/python -m pytest -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"
