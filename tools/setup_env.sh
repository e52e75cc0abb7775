#!/usr/bin/env bash
# One-command, idempotent setup: bash tools/setup_env.sh [--plan|--check-first-time|--update-lock|--help]
# This entry only finds a Python (3.11-3.13) and hands over to tools/setup_env.py, which fetches uv
# (pinned, from the package index), lets it create the environment and install the lock of
# STACK=openmmlab (default) or STACK=onedl, and holds the one decision (--plan) and the docs (--help).
# The environment: $INLINE_DENSE_VENV when set, else the active virtual environment, else .venv.
# The interpreter: that environment's when it exists, else $PYTHON (default python3), which then
# creates it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${INLINE_DENSE_VENV:-${VIRTUAL_ENV:-$ROOT/.venv}}"
if "$VENV/bin/python" -c pass 2>/dev/null; then PY="$VENV/bin/python"
else PY="${PYTHON:-python3}"; fi
if ! command -v "$PY" >/dev/null; then
  printf '[setup] ERROR: no Python interpreter %s found\n[setup]   -> install Python 3.11-3.13, or point PYTHON at one: PYTHON=/path/to/python3.13 bash tools/setup_env.sh\n' "$PY" >&2
  exit 1
fi
exec "$PY" "$ROOT/tools/setup_env.py" "$@"
