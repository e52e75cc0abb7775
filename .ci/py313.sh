#!/usr/bin/env bash
# CI step, from the repository root: the setup from nothing on the newest Python pyproject.toml admits
# (3.13), then the checkpoint fidelity, mmcv ops and toy end-to-end tests on it, and the torch-only core
# at the lock's torch on it (.ci/core_only.sh newest, from this step's uv cache). Like step 1 of .ci/run:
# empty uv, pip and setup caches, no compiler, its own environment in a scratch folder.
# The interpreter: $PYTHON313 when set, else python3.13 on PATH, else pyenv's newest 3.13.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .ci/lib.sh
start=$(date +%s)
newest=$(python_newest)
py=${PYTHON313:-$(find_python "$newest")}
if [ -z "$py" ] || ! "$py" -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null; then
  echo "[ci-py313] ERROR: no Python $newest interpreter found${py:+ ($py is not $newest)}" >&2
  echo "[ci-py313]   -> install one (pyenv install $newest, or apt-get install python$newest), or set PYTHON313=/path/to/python$newest" >&2
  exit 1
fi
venv="$scratch/venv-py313"
export INLINE_DENSE_CACHE="$scratch/cache" UV_CACHE_DIR="$scratch/uv-cache" PIP_CACHE_DIR="$scratch/pip-cache"
echo "[ci-py313] setup from nothing with $py ($("$py" -c 'import platform; print(platform.python_version())')) into $venv"
env -u VIRTUAL_ENV INLINE_DENSE_VENV="$venv" PYTHON="$py" PATH="$no_compiler:$PATH" bash tools/setup_env.sh
setup_done=$(date +%s)
echo "[ci-py313] setup from nothing on Python $newest, no compiler: $(( setup_done - start )) s"
"$venv/bin/python" -m pytest -q -n 2 --durations=10 tests/families/test_fidelity.py tests/ops/test_mmcv_ops.py tests/openmmlab/test_toy_e2e.py
PYTHON="$py" bash .ci/core_only.sh newest
echo "[ci-py313] tests on Python $newest: $(( $(date +%s) - setup_done )) s; whole step: $(( $(date +%s) - start )) s"
