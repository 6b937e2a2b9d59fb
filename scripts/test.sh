#!/usr/bin/env bash
# Install (scripts/setup.sh) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
export TIKTOKEN_CACHE_DIR="${TIKTOKEN_CACHE_DIR:-$ROOT/../shared/data/tiktoken}"
exec .venv/bin/python -m pytest -q -ra "$@"
