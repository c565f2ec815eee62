#!/usr/bin/env bash
# Creates .venv (Python 3.11+) and installs ultimate-rag into it; with "test", the test tools too.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ultimate-rag needs Python 3.11 or newer")'
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
if [ "${1:-}" = "test" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
else
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
fi
# the single-pass encoder (one forward pass for a text's dense and sparse vectors), built now rather
# than at the first document; without a C compiler this says so once and the model makes two passes
.venv/bin/python -m ultimate_rag.adapters.embedders.native_pair || true
