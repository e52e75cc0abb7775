#!/usr/bin/env bash
# One-command, idempotent setup of the OpenMMLab stack + inline_dense.
#
# Installs into the ACTIVE virtual environment when one is active ($VIRTUAL_ENV),
# otherwise into .venv/ inside this checkout (created on first run, ignored by git).
#
#   bash tools/setup_env.sh            # set up (first run ~20 min, later runs < 1 min)
#
# Environment knobs:
#   INLINE_DENSE_CACHE   where built mmcv wheels are cached (default ~/.cache/inline_dense)
#   MAX_JOBS             parallel compile jobs for mmcv (default: number of cores)
#   FORCE_CUDA=1/0       build mmcv CUDA ops or not (default: auto, needs a GPU and nvcc)
set -euo pipefail

TORCH_PIN="torch==2.14.1"
TORCHVISION_PIN="torchvision==0.29.1"
MMENGINE_PIN="mmengine==0.10.7"
MMCV_VERSION="2.1.0"
MMDET_PIN="mmdet==3.3.0"
MMSEG_PIN="mmsegmentation==1.2.2"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${INLINE_DENSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inline_dense}"
T0=$(date +%s)

say()  { printf '[setup] %s\n' "$*"; }
fail() { printf '\n[setup] ERROR: %s\n' "$1" >&2; shift; for l in "$@"; do printf '[setup]   -> %s\n' "$l" >&2; done; exit 1; }

# ---------------------------------------------------------------- preflight
PY_BOOT="${PYTHON:-python3}"
command -v "$PY_BOOT" >/dev/null || fail "no '$PY_BOOT' found" "install Python 3.9-3.11, or set PYTHON=/path/to/python3.11"

if [ -n "${VIRTUAL_ENV:-}" ]; then
  VENV="$VIRTUAL_ENV"
  say "using the active virtual environment $VENV"
else
  VENV="$ROOT/.venv"
  if [ ! -x "$VENV/bin/python" ]; then
    pyv=$("$PY_BOOT" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    case "$pyv" in 3.9|3.10|3.11) ;; *) fail "Python $pyv is not supported by mmcv 2.1.0 / mmdet 3.3.0" \
      "use Python 3.9, 3.10 or 3.11: PYTHON=python3.11 bash tools/setup_env.sh";; esac
    say "creating virtual environment $VENV"
    "$PY_BOOT" -m venv "$VENV" || fail "could not create a venv" "install the venv module (Debian: apt-get install python3-venv)"
  fi
fi
PY="$VENV/bin/python"
PYV=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
case "$PYV" in 3.9|3.10|3.11) ;; *) fail "Python $PYV in $VENV is not supported by mmcv 2.1.0 / mmdet 3.3.0" \
  "use an environment with Python 3.9, 3.10 or 3.11";; esac
PIP=("$PY" -m pip --disable-pip-version-check)

free_gb=$(df -Pk "$VENV" | awk 'NR==2 {print int($4/1048576)}')
[ "$free_gb" -ge 3 ] || fail "only ${free_gb} GiB free on $(df -P "$VENV" | awk 'NR==2{print $6}')" \
  "torch + mmcv need about 8 GiB on first install: free some disk space and run again"

# ---------------------------------------------------------------- torch
if "$PY" -c 'import torch' 2>/dev/null; then
  say "keeping installed torch $("$PY" -c 'import torch; print(torch.__version__)')"
else
  say "installing $TORCH_PIN $TORCHVISION_PIN"
  "${PIP[@]}" install -q "$TORCH_PIN" "$TORCHVISION_PIN" || fail "torch install failed" "check network access to PyPI and free disk space"
fi
read -r TORCH_VER TORCH_CUDA CUDA_AVAIL < <("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda or "none", int(torch.cuda.is_available()))')

# build-time pins: mmcv 2.1.0's setup.py breaks with setuptools >= 70 and wheel >= 0.44
"${PIP[@]}" install -q "setuptools<70" "wheel<0.44" ninja "$MMENGINE_PIN" || fail "could not install build tools / mmengine" "check network access to PyPI"

# ---------------------------------------------------------------- mmcv (cached wheel)
if [ -z "${FORCE_CUDA:-}" ]; then
  if [ "$CUDA_AVAIL" = 1 ] && command -v nvcc >/dev/null; then FORCE_CUDA=1; else FORCE_CUDA=0; fi
fi
OPS=cpu; [ "$FORCE_CUDA" = 1 ] && OPS="cuda${TORCH_CUDA}"
KEY="mmcv-${MMCV_VERSION}_torch-${TORCH_VER}_py${PYV}_ops-${OPS}"
WHEEL_DIR="$CACHE/wheels/$KEY"

have_mmcv() { "$PY" - "$MMCV_VERSION" <<'PYEOF' 2>/dev/null
import sys, mmcv
from mmcv.ops import nms  # noqa: F401  (fails when the compiled ops are missing)
import mmcv._ext  # noqa: F401
sys.exit(0 if mmcv.__version__ == sys.argv[1] else 1)
PYEOF
}

if have_mmcv; then
  say "mmcv $MMCV_VERSION with compiled ops already installed"
else
  if ! ls "$WHEEL_DIR"/mmcv-*.whl >/dev/null 2>&1; then
    command -v g++ >/dev/null || fail "no C++ compiler (g++) found; mmcv $MMCV_VERSION must be compiled" \
      "Debian/Ubuntu: apt-get install -y build-essential" "then run this script again"
    src_free=$(df -Pk "${TMPDIR:-/tmp}" | awk 'NR==2 {print int($4/1048576)}')
    [ "$src_free" -ge 2 ] || fail "only ${src_free} GiB free in ${TMPDIR:-/tmp} for the mmcv build" "free space or set TMPDIR to a larger disk"
    # C++ standard: whatever the installed torch's headers need (torch >= 2.10 requires C++20, older ones C++17)
    CXXSTD=$("$PY" "$ROOT/tools/torch_cxx_std.py") || fail "could not compile a probe against torch's headers" \
      "check that g++ works: g++ --version"
    say "building mmcv $MMCV_VERSION from source (ops: $OPS, $CXXSTD, ${MAX_JOBS:-$(nproc)} jobs); this takes ~15 min on 2 cores, once"
    BUILD=$(mktemp -d)
    trap 'rm -rf "$BUILD"' EXIT
    "${PIP[@]}" download -q --no-deps --no-binary :all: "mmcv==$MMCV_VERSION" -d "$BUILD" \
      || fail "could not download the mmcv $MMCV_VERSION source" "check network access to PyPI"
    tar -xzf "$BUILD"/mmcv-"$MMCV_VERSION".tar.gz -C "$BUILD"
    SRC="$BUILD/mmcv-$MMCV_VERSION"
    # mmcv hard-codes -std=c++14/c++17 in its setup.py; use the standard torch needs instead.
    sed -i -E "s/-std=c\+\+1[47]/-std=${CXXSTD}/g" "$SRC/setup.py"
    LOG="$CACHE/logs/$KEY.log"; mkdir -p "$(dirname "$LOG")" "$WHEEL_DIR"
    if ! (cd "$SRC" && MMCV_WITH_OPS=1 FORCE_CUDA="$FORCE_CUDA" MAX_JOBS="${MAX_JOBS:-$(nproc)}" \
          "${PIP[@]}" wheel --no-build-isolation --no-deps -w "$BUILD/out" . ) >"$LOG" 2>&1; then
      grep -E "error:|Error:|No space left|Killed" "$LOG" | head -n 15 >&2 || true
      fail "the mmcv build failed; full log: $LOG" \
        "'No space left': free disk space; 'Killed': not enough memory, retry with MAX_JOBS=1" \
        "compiler errors: check g++ >= 9 and that torch's headers match (torch $TORCH_VER)"
    fi
    cp "$BUILD"/out/mmcv-*.whl "$WHEEL_DIR/"
    say "cached $(ls "$WHEEL_DIR"/mmcv-*.whl)"
  fi
  "${PIP[@]}" install -q --no-deps --force-reinstall "$WHEEL_DIR"/mmcv-*.whl
  "${PIP[@]}" install -q addict packaging pillow pyyaml yapf opencv-python numpy || fail "could not install mmcv's dependencies" "check network access to PyPI"
  have_mmcv || fail "mmcv installed from $WHEEL_DIR but its ops do not import" "delete $WHEEL_DIR and run this script again"
fi

# ---------------------------------------------------------------- mmdet, mmseg, the rest, this package
"${PIP[@]}" install -q "$MMDET_PIN" "$MMSEG_PIN" "timm>=0.9" pycocotools "pytest>=7" matplotlib ftfy regex \
  -e "$ROOT" || fail "installing mmdet / mmseg / this package failed" "check network access to PyPI; the pip output above says which package"

"$PY" -c 'import inline_dense, mmdet, mmseg, mmcv; print("[setup] ok: torch", __import__("torch").__version__, "mmcv", mmcv.__version__, "mmdet", mmdet.__version__, "mmseg", mmseg.__version__)'
say "done in $(( $(date +%s) - T0 )) s; activate with: source $VENV/bin/activate"
