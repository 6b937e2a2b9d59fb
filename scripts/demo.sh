#!/usr/bin/env bash
# Install (scripts/setup.sh) and run the end-to-end demo. Extra arguments go to `cobalt demo`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
export TIKTOKEN_CACHE_DIR="${TIKTOKEN_CACHE_DIR:-$ROOT/../shared/data/tiktoken}"
exec .venv/bin/cobalt demo "$@"
