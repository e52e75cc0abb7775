#!/usr/bin/env bash
# CI step, from the repository root: the stack that is not the default (STACK=onedl: onedl-mmengine,
# onedl-mmcv without ops, onedl-mmdetection, onedl-mmsegmentation) set up from nothing, then the
# whole suite on it, the slow end-to-end tests included, but for the torch-only compiles and anchors
# listed below. Like step 1 of .ci/run: empty uv, pip and
# setup caches, no compiler, its own environment in a scratch folder. OTHER_STACK names the stack
# (default onedl). A failing step exits non-zero; the last line gives the step's time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .ci/lib.sh
stack="${OTHER_STACK:-onedl}"
start=$(date +%s)
venv="$scratch/venv-$stack"
echo "[ci-$stack] setup from nothing (STACK=$stack) into $venv"
env -u VIRTUAL_ENV STACK="$stack" INLINE_DENSE_VENV="$venv" INLINE_DENSE_CACHE="$scratch/cache" \
  UV_CACHE_DIR="$scratch/uv-cache" PIP_CACHE_DIR="$scratch/pip-cache" PATH="$no_compiler:$PATH" \
  bash tools/setup_env.sh
setup_done=$(date +%s)
echo "[ci-$stack] setup from nothing, no compiler: $(( setup_done - start )) s"
# Minutes of torch-only work that imports nothing the stacks differ in (inductor compiles, the ONNX /
# OpenVINO anchors of a bare backbone): run once, on the default stack.
torch_only=(--deselect tests/runtime/test_compiling.py::test_inductor_matches_eager_within_the_bf16_bound
            --deselect tests/analysis/test_gemm.py::test_anchor_rows_on_a_tiny_backbone
            --ignore tests/layers/test_compile.py)
INLINE_DENSE_CACHE="$scratch/cache" "$venv/bin/python" -m pytest -q -n auto --maxschedchunk 1 tests "${torch_only[@]}" \
  --durations=10
echo "[ci-$stack] the whole suite on STACK=$stack: $(( $(date +%s) - setup_done )) s; whole step: $(( $(date +%s) - start )) s"
