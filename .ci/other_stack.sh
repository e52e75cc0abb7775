#!/usr/bin/env bash
# CI step, from the repository root: the stack that is not the default (STACK=onedl: onedl-mmengine,
# onedl-mmcv without ops, onedl-mmdetection, onedl-mmsegmentation) set up from nothing, then the
# whole suite on it, the slow end-to-end tests included.
# Like step 1 of .ci/run: empty uv, pip and setup caches, and cc/gcc/g++/c++ replaced by programs
# that fail. The environment is a separate one (INLINE_DENSE_VENV, in a scratch folder removed at the
# end), so .venv (the default stack's) is left alone.
# OTHER_STACK names the stack (default onedl). A failing step exits non-zero; the last line gives the
# step's time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
stack="${OTHER_STACK:-onedl}"
start=$(date +%s)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/no-compiler"
for c in cc gcc g++ c++; do
  printf '#!/bin/sh\necho "CI: no C/C++ compiler here ($0)" >&2\nexit 1\n' >"$scratch/no-compiler/$c"
  chmod +x "$scratch/no-compiler/$c"
done
venv="$scratch/venv-$stack"
echo "[ci-$stack] setup from nothing (STACK=$stack) into $venv"
# VIRTUAL_ENV unset: INLINE_DENSE_VENV wins anyway, but an active environment must not leak in.
env -u VIRTUAL_ENV STACK="$stack" INLINE_DENSE_VENV="$venv" INLINE_DENSE_CACHE="$scratch/cache" \
  UV_CACHE_DIR="$scratch/uv-cache" PIP_CACHE_DIR="$scratch/pip-cache" PATH="$scratch/no-compiler:$PATH" \
  bash tools/setup_env.sh
setup_done=$(date +%s)
echo "[ci-$stack] setup from nothing, no compiler: $(( setup_done - start )) s"
# The tests see the scratch setup cache, as .ci/run's do.
INLINE_DENSE_CACHE="$scratch/cache" "$venv/bin/python" -m pytest -q -n auto --maxschedchunk 1 tests --durations=10
echo "[ci-$stack] the whole suite on STACK=$stack: $(( $(date +%s) - setup_done )) s; whole step: $(( $(date +%s) - start )) s"
