#!/usr/bin/env bash
# The torch-only core in an environment holding nothing but its own requirements, at either end of
# what pyproject.toml declares:
#   floor   the lowest Python and, by pip, the lowest torch, numpy and filelock pyproject.toml admits
#           (torch from the machine's wheel folder where pip finds it there), then `pip install .`
#   newest  the newest Python pyproject.toml admits (PYTHON, else found) and, by uv from its cache, the
#           versions uv.lock pins, then this package without dependencies
# A copy of the checkout is installed non-editable; .ci/core_only_check.py then runs from OUTSIDE the
# checkout: import, every preset at odd input sizes, the authors' fixtures through path, URL and
# inline://, and no OpenMMLab or timm module imported. Usage: bash .ci/core_only.sh floor|newest
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$(pwd)
source .ci/lib.sh
end=${1:?usage: bash .ci/core_only.sh floor|newest}
start=$(date +%s)
# the core's requirements as NAME==VERSION: their floors (pyproject.toml) or their pins (uv.lock)
names=$(python3 -c 'import re, tomllib; print(" ".join(re.match(r"[\w.-]+", d).group() for d in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
if [ "$end" = floor ]; then
  py=$(find_python "$(python_floor)")
  pins=$(python3 -c 'import re, tomllib; print(" ".join("==".join(re.match(r"([\w.-]+)>=([\d.]+)", d).groups()) for d in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
else
  py=${PYTHON:-$(find_python "$(python_newest)")}
  pins=$(PYTHONPATH="$repo" python3 -m inline_dense_dev.uvlock $names)
fi
[ -n "$py" ] || { echo "[core-only] ERROR: no Python for the $end run -> install it (pyenv install X.Y)" >&2; exit 1; }
# a copy of the checkout, so that the build leaves nothing (build/, *.egg-info) in it
mkdir "$scratch/src"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  if [ -f "$f" ]; then cp --parents "$f" "$scratch/src"; fi
done
echo "[core-only] $end: $("$py" -V), $pins"
if [ "$end" = floor ]; then
  "$py" -m venv "$scratch/venv"
  "$scratch/venv/bin/python" -m pip install -q $pins
  "$scratch/venv/bin/python" -m pip install -q "$scratch/src"
else
  uv="${UV:-${INLINE_DENSE_CACHE:-$HOME/.cache/inline_dense}/uv/$(sed -n 's/^uv==\([^ ]*\).*/\1/p' requirements/build.txt)/bin/uv}"
  "$uv" venv -q --python "$py" "$scratch/venv"
  "$uv" pip install -q --python "$scratch/venv/bin/python" $pins
  "$uv" pip install -q --python "$scratch/venv/bin/python" --no-deps "$scratch/src"
fi
for pin in $pins; do  # what is installed is what was asked: the floor run tests the floors
  got=$("$scratch/venv/bin/python" -c "import importlib.metadata as m; print(m.version('${pin%%==*}').split('+')[0])")
  [ "$got" = "${pin#*==}" ] || [ "$got" = "${pin#*==}.0" ] || { echo "[core-only] ERROR: ${pin%%==*} $got installed, not ${pin#*==}" >&2; exit 1; }
done
installed=$(date +%s)
fixtures="$repo/../shared/fixtures"
[ -f "$fixtures/inline_swin_mini_reference.pt" ] || fixtures="$repo/tests/data/fixtures"
cd "$scratch"
"$scratch/venv/bin/python" -I "$repo/.ci/core_only_check.py" "$fixtures" "$repo"
echo "[core-only] $end: venv and install $(( installed - start )) s, check $(( $(date +%s) - installed )) s"
