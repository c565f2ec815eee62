#!/usr/bin/env bash
# Sets everything up and runs the service on the embedded default (arguments go to `ultimate-rag up`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/ultimate-rag up "$@"
