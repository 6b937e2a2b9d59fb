#!/usr/bin/env bash
# Install everything Cobalt needs into ./.venv (idempotent): Debian's bubblewrap,
# then the package with all extras, at the versions pinned in constraints.txt.
# Usage: scripts/setup.sh            (COBALT_PYTHON=python3.11 to choose the interpreter)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if ! command -v bwrap >/dev/null 2>&1; then
  echo "setup: installing bubblewrap (Debian package)"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  else
    echo "setup: bubblewrap (bwrap) is missing and this user cannot install Debian packages." >&2
    echo "       Ask an administrator for 'apt-get install bubblewrap', or install it without root:" >&2
    echo "       'conda install -c conda-forge bubblewrap' and put its bin/ on PATH." >&2
    exit 1
  fi
fi

PY="${COBALT_PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
STAMP=.venv/.cobalt-installed
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ] || [ constraints.txt -nt "$STAMP" ]; then
  .venv/bin/python -m pip install -q --upgrade "pip==26.3"
  # CPU torch first (verl needs it; GPU machines install their CUDA build instead).
  .venv/bin/python -m pip install -q -c constraints.txt "torch==2.13.0"
  .venv/bin/python -m pip install -q -c constraints.txt -e ".[serve,reward,data,train,api,dev]"
  touch "$STAMP"
fi
.venv/bin/cobalt --version
