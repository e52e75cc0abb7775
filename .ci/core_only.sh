#!/usr/bin/env bash
# The torch-only core in an environment with nothing but torch, torchvision and numpy:
# a fresh venv (no system site packages) in a temporary folder, those three pinned by
# requirements/lock.txt (the torch wheel comes from PIP_CACHE_DIR when the setup filled it), this
# package installed non-editable without its dependencies, then .ci/core_only_check.py run from
# OUTSIDE the checkout: import, every preset at odd input sizes, the authors' fixtures loaded through
# path, URL and inline:// matching their reference, and no OpenMMLab or timm module imported.
# Usage: bash .ci/core_only.sh  (from anywhere; PYTHON picks the interpreter, default python3)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
start=$(date +%s)
"${PYTHON:-python3}" -m venv "$scratch/venv"
py="$scratch/venv/bin/python"
# The lock's pins (and markers) without its hash lines: pip requires hashes of everything once one has them.
grep -E '^[A-Za-z0-9]' "$repo/requirements/lock.txt" | sed 's/ *\\$//' >"$scratch/constraints.txt"
"$py" -m pip install -q --disable-pip-version-check -c "$scratch/constraints.txt" torch torchvision numpy
# a copy of the checkout, so that the build leaves nothing (build/, *.egg-info) in it
mkdir "$scratch/src"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  if [ -f "$f" ]; then cp --parents "$f" "$scratch/src"; fi
done)
"$py" -m pip install -q --disable-pip-version-check --no-deps "$scratch/src"
installed=$(date +%s)
fixtures="$repo/../shared/fixtures"
[ -f "$fixtures/inline_swin_mini_reference.pt" ] || fixtures="$repo/tests/data/fixtures"
cd "$scratch"
"$py" -I "$repo/.ci/core_only_check.py" "$fixtures" "$repo"
echo "[ci] core-only: venv and install $(( installed - start )) s, check $(( $(date +%s) - installed )) s"
