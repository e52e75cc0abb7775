#!/usr/bin/env bash
# bash tools/setup_env.sh [--plan|--check-first-time|--help]: the environment's own Python (else $PYTHON,
# default python3) runs the setup (inline_dense_dev/setup, the checkout's development package, found
# through PYTHONPATH), which has uv sync the environment to uv.lock.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${INLINE_DENSE_VENV:-$ROOT/.venv}"
if [ -d "$VENV" ] && "$VENV/bin/python" -c pass 2>/dev/null; then PY="$VENV/bin/python"
else PY="${PYTHON:-python3}"; fi
if ! command -v "$PY" >/dev/null; then
  printf '[setup] ERROR: no Python interpreter %s found\n[setup]   -> install Python 3.11-3.13, or point PYTHON at one: PYTHON=/path/to/python3.13 bash tools/setup_env.sh\n' "$PY" >&2
  exit 1
fi
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" -m inline_dense_dev.setup "$@"
