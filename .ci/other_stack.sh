#!/usr/bin/env bash
# CI step, from the repository root: the stack that is not the default (STACK=onedl: onedl-mmengine,
# onedl-mmcv without ops, onedl-mmdetection, onedl-mmsegmentation) set up from nothing, then the tests
# whose outcome the stack can change. Like step 1 of .ci/run: empty uv, pip and setup caches, no
# compiler, its own environment in a scratch folder. OTHER_STACK names the stack (default onedl).
# What runs here, and why only that:
#  - the two environments share every distribution outside the stack at one version (uv.lock; checked
#    first, .ci/shared_versions.py), so a test of torch, timm, smp, torchvision or transformers code
#    runs the same code on both and runs once, on the default stack;
#  - the folders whose subject is the OpenMMLab stack (openmmlab, ops, tools, deploy, checkpoint) and,
#    elsewhere, every test module that names an OpenMMLab package: their quick tests, and the
#    end-to-end runs of the stack's own machinery (marker `stack`: mmdet's and mmseg's train tools, two
#    processes, kill and resume, panoptic and Cityscapes metrics, registries, a quiet first run);
#    in those modules, the tests of the torch-only core alone (marker `core`: dynamo capture, TorchScript,
#    every preset's shapes) stay out: torch decides their outcome, the same on both;
#  - the other end-to-end runs spend their minutes in torch (ONNX exports, inductor compiles, the
#    two-process repeat of every toy, the demo's 400 iterations) or set up the default stack's wheels
#    (the GPU check's dry run): the default stack's run covers them.
# A failing step exits non-zero; the last line gives the step's time.
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
default_python="${INLINE_DENSE_VENV:-.venv}/bin/python"
python3 .ci/shared_versions.py "$default_python" "$venv/bin/python"
stack_folders=(tests/openmmlab tests/ops tests/tools tests/deploy tests/checkpoint)
mapfile -t elsewhere < <(find tests -name 'test_*.py' | sort | grep -vE "^($(IFS='|'; echo "${stack_folders[*]}"))/" \
  | xargs grep -lwE 'mmengine|mmcv|mmdet|mmseg')
echo "[ci-$stack] the stack's folders and ${#elsewhere[@]} modules elsewhere that name an OpenMMLab package"
INLINE_DENSE_CACHE="$scratch/cache" "$venv/bin/python" -m pytest -q -n auto --maxschedchunk 1 -m '(not slow or stack) and not core' \
  "${stack_folders[@]}" "${elsewhere[@]}" --durations=10
echo "[ci-$stack] the stack's tests on STACK=$stack: $(( $(date +%s) - setup_done )) s; whole step: $(( $(date +%s) - start )) s"
