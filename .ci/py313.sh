#!/usr/bin/env bash
# CI step, from the repository root: the setup from nothing on Python 3.13, then a subset of the
# tests on it (the checkpoint fidelity, the mmcv ops and the toy end-to-end tests).
# Like step 1 of .ci/run: empty uv, pip and setup caches, and cc/gcc/g++/c++ replaced by
# programs that fail. The environment is a separate one (INLINE_DENSE_VENV, in a scratch folder
# removed at the end), so .venv (the main Python's) is left alone.
# The interpreter: $PYTHON313 when set, else python3.13 on PATH, else pyenv's newest 3.13.
# A failing step exits non-zero; the last line gives the step's time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$(date +%s)

find_python313() {
  if [ -n "${PYTHON313:-}" ]; then echo "$PYTHON313"; return; fi
  if python3.13 -c pass 2>/dev/null; then command -v python3.13; return; fi
  local root candidate
  root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  for candidate in $(ls -d "$root"/versions/3.13* 2>/dev/null | sort -V -r); do
    if "$candidate/bin/python3.13" -c pass 2>/dev/null; then echo "$candidate/bin/python3.13"; return; fi
  done
}
py=$(find_python313)
if [ -z "$py" ] || ! "$py" -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null; then
  echo "[ci-py313] ERROR: no Python 3.13 interpreter found${py:+ ($py is not 3.13)}" >&2
  echo "[ci-py313]   -> install one (pyenv install 3.13, or apt-get install python3.13), or set PYTHON313=/path/to/python3.13" >&2
  exit 1
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/no-compiler"
for c in cc gcc g++ c++; do
  printf '#!/bin/sh\necho "CI: no C/C++ compiler here ($0)" >&2\nexit 1\n' >"$scratch/no-compiler/$c"
  chmod +x "$scratch/no-compiler/$c"
done
venv="$scratch/venv-py313"
echo "[ci-py313] setup from nothing with $py ($("$py" -c 'import platform; print(platform.python_version())')) into $venv"
# VIRTUAL_ENV unset: INLINE_DENSE_VENV wins anyway, but an active environment must not leak in.
env -u VIRTUAL_ENV INLINE_DENSE_VENV="$venv" PYTHON="$py" INLINE_DENSE_CACHE="$scratch/cache" \
  UV_CACHE_DIR="$scratch/uv-cache" PIP_CACHE_DIR="$scratch/pip-cache" PATH="$scratch/no-compiler:$PATH" \
  bash tools/setup_env.sh
setup_done=$(date +%s)
echo "[ci-py313] setup from nothing on Python 3.13, no compiler: $(( setup_done - start )) s"
# The tests see the scratch setup cache, as .ci/run's do.
INLINE_DENSE_CACHE="$scratch/cache" "$venv/bin/python" -m pytest -q -n 2 --durations=10 \
  tests/families/test_fidelity.py tests/ops/test_mmcv_ops.py tests/openmmlab/test_toy_e2e.py
echo "[ci-py313] tests on Python 3.13: $(( $(date +%s) - setup_done )) s; whole step: $(( $(date +%s) - start )) s"
