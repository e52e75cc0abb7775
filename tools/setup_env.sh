#!/usr/bin/env bash
# One-command, idempotent setup: bash tools/setup_env.sh [--plan|--check-first-time|--update-lock|--help]
# This entry only finds a Python (3.9-3.12) and hands over to tools/setup_env.py, which holds the
# setup, its one decision (also printed by --plan) and its documentation (--help).
# The interpreter: the active virtual environment's, else an existing .venv's, else $PYTHON
# (default python3), which then creates .venv.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${VIRTUAL_ENV:-}" ]; then PY="$VIRTUAL_ENV/bin/python"
elif "$ROOT/.venv/bin/python" -c pass 2>/dev/null; then PY="$ROOT/.venv/bin/python"
else PY="${PYTHON:-python3}"; fi
if ! command -v "$PY" >/dev/null; then
  printf '[setup] ERROR: no Python interpreter %s found\n[setup]   -> install Python 3.9-3.12, or point PYTHON at one: PYTHON=/path/to/python3.12 bash tools/setup_env.sh\n' "$PY" >&2
  exit 1
fi
exec "$PY" "$ROOT/tools/setup_env.py" "$@"
