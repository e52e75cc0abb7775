#!/usr/bin/env bash
# One-command, idempotent setup of the OpenMMLab stack + inline_dense.
#
# Installs into the ACTIVE virtual environment when one is active ($VIRTUAL_ENV),
# otherwise into .venv/ inside this checkout (created on first run, ignored by git).
#
#   bash tools/setup_env.sh     # first run: ~20-35 min (mmcv is compiled); later runs: seconds
#
# Caches (outside the checkout, in $INLINE_DENSE_CACHE):
#   wheels/<mmcv-torch-python-ops>/  the mmcv wheel built for that torch/Python/CUDA combination
#   venvs/<python-recipe>/           a hard-linked snapshot of a finished .venv: a fresh clone of
#                                    this repository on the same machine (CI) starts from it in seconds
#
# Environment knobs:
#   PYTHON               interpreter used to create .venv (default python3; 3.9-3.11)
#   INLINE_DENSE_CACHE   where built mmcv wheels are cached (default ~/.cache/inline_dense)
#   MAX_JOBS             parallel compile jobs for mmcv (default: number of cores)
#   FORCE_CUDA=1/0       build mmcv CUDA ops or not (default: auto, needs a GPU and nvcc)
#   SETUP_FORCE=1        skip the "already set up" shortcut and re-check every package with pip
set -euo pipefail

TORCH_PIN="torch==2.14.1"
TORCHVISION_PIN="torchvision==0.29.1"
MMENGINE_VERSION="0.10.7"
MMCV_VERSION="2.1.0"
MMDET_VERSION="3.3.0"
MMSEG_VERSION="1.2.2"
# mmcv 2.1.0's setup.py predates setuptools 70 / wheel 0.44 (newer ones silently build it
# without its compiled ops). They are installed into a throw-away folder used only by the
# build, so the environment keeps the setuptools torch asks for (>= 77) and pip sees no conflict.
BUILD_PINS=("setuptools<70" "wheel<0.44" "ninja")
# mmengine 0.10.7 resolves 'mmdet::' / 'mmseg::' config paths with pkg_resources, which
# setuptools >= 81 no longer ships (torch 2.14 itself asks for setuptools >= 77).
OTHER_REQS=("setuptools<81" "timm>=0.9" "pycocotools>=2.0.8" "pytest>=7" "ftfy" "regex")

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${INLINE_DENSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inline_dense}"
T0=$(date +%s)

say()  { printf '[setup] %s\n' "$*"; }
fail() { printf '\n[setup] ERROR: %s\n' "$1" >&2; shift; for l in "$@"; do printf '[setup]   -> %s\n' "$l" >&2; done; exit 1; }
trap 'rc=$?; printf "\n[setup] ERROR: unexpected failure (exit %s) at tools/setup_env.sh line %s: %s\n" "$rc" "$LINENO" "$BASH_COMMAND" >&2' ERR
free_gib() { df -Pk "$1" | awk 'NR==2 {print int($4/1048576)}'; }
supported_python() { case "$1" in 3.9|3.10|3.11) return 0;; *) return 1;; esac; }

# ---------------------------------------------------------------- the environment
RECIPE=$(cat "$ROOT/tools/setup_env.sh" "$ROOT/setup.py" | sha256sum | cut -c1-16)
TEMPLATE=""

template_for() {  # the snapshot folder for venvs made from this interpreter with this recipe
  "$1" -c 'import os, sys; print("py%d.%d" % sys.version_info[:2], os.path.realpath(sys.base_prefix))' \
    | { read -r v base; printf '%s/venvs/%s-%s-%s' "$CACHE" "$v" "$(printf '%s' "$base" | sha256sum | cut -c1-8)" "$RECIPE"; }
}
# A snapshot of a finished .venv (hard links, so no extra disk) for fresh clones to start from.
clone_template() {  # template -> $VENV; fails without leaving a half-made $VENV
  local origin
  origin=$(cat "$1/.inline_dense_template") || return 1
  { cp -al "$1" "$VENV" 2>/dev/null || { rm -rf "$VENV"; cp -a "$1" "$VENV"; }; } || { rm -rf "$VENV"; return 1; }
  rm -f "$VENV/.inline_dense_template"
  # Files naming the venv's own path: script #! lines, activate*, pyvenv.cfg. sed -i writes
  # a new file, so the snapshot's hard-linked original stays as it was.
  { grep -rlIF -- "$origin" "$VENV/bin" "$VENV/pyvenv.cfg" || true; } | while read -r f; do sed -i "s|$origin|$VENV|g" "$f"; done
  "$VENV/bin/python" -m pip -q --disable-pip-version-check install --no-deps --use-pep517 --no-build-isolation \
    -e "$ROOT" >/dev/null 2>&1 || { rm -rf "$VENV"; return 1; }
  printf '%s %s\n' "$ROOT" "$RECIPE" >"$VENV/.inline_dense_setup"
}
save_template() {
  [ -n "$TEMPLATE" ] && [ ! -d "$TEMPLATE" ] || return 0
  mkdir -p "$(dirname "$TEMPLATE")" && rm -rf "$TEMPLATE.tmp"
  # Only where hard links work (same disk): a full copy would cost minutes and gigabytes.
  cp -al "$VENV" "$TEMPLATE.tmp" 2>/dev/null || { rm -rf "$TEMPLATE.tmp"; return 0; }
  rm -f "$TEMPLATE.tmp/.inline_dense_setup"
  printf '%s\n' "$VENV" >"$TEMPLATE.tmp/.inline_dense_template"
  mv "$TEMPLATE.tmp" "$TEMPLATE"
  for old in "${TEMPLATE%-*}"-*; do [ "$old" = "$TEMPLATE" ] || rm -rf "$old"; done
  say "saved a snapshot of this environment for fresh clones: $TEMPLATE"
}

if [ -n "${VIRTUAL_ENV:-}" ]; then
  VENV="$VIRTUAL_ENV"
  say "using the active virtual environment $VENV"
else
  VENV="$ROOT/.venv"
  if [ ! -x "$VENV/bin/python" ]; then
    PY_BOOT="${PYTHON:-python3}"
    command -v "$PY_BOOT" >/dev/null || fail "no '$PY_BOOT' found" \
      "install Python 3.9, 3.10 or 3.11, or point PYTHON at one: PYTHON=/path/to/python3.11 bash tools/setup_env.sh"
    pyv=$("$PY_BOOT" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    supported_python "$pyv" || fail "Python $pyv ($PY_BOOT) is not supported by mmcv 2.1.0 / mmdet 3.3.0" \
      "use Python 3.9, 3.10 or 3.11: PYTHON=python3.11 bash tools/setup_env.sh"
    tmpl=$(template_for "$PY_BOOT")
    if [ -f "$tmpl/.inline_dense_template" ] && [ "${SETUP_FORCE:-0}" != 1 ] && clone_template "$tmpl"; then
      say "started $VENV from the snapshot $tmpl"
    else
      say "creating virtual environment $VENV (Python $pyv)"
      "$PY_BOOT" -m venv "$VENV" || fail "could not create a virtual environment with $PY_BOOT" \
        "Debian/Ubuntu: apt-get install -y python3-venv (or python$pyv-venv), then run this script again"
    fi
  fi
fi
PY="$VENV/bin/python"
"$PY" -c 'pass' 2>/dev/null || fail "$PY does not run (was its base Python removed or upgraded?)" \
  "delete $VENV and run this script again"
PYV=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
supported_python "$PYV" || fail "Python $PYV in $VENV is not supported by mmcv 2.1.0 / mmdet 3.3.0" \
  "use an environment with Python 3.9, 3.10 or 3.11 (without VIRTUAL_ENV set, this script makes .venv; PYTHON=python3.11 picks the interpreter)"
PIP=("$PY" -m pip --disable-pip-version-check)
if [ "$VENV" = "$ROOT/.venv" ]; then TEMPLATE=$(template_for "$PY"); fi

# ---------------------------------------------------------------- shortcut: nothing to do
# The stamp names this checkout and the exact setup recipe; with it, only a quick import
# check runs (every pinned version present, mmcv's compiled ops load, inline_dense points here).
STAMP="$VENV/.inline_dense_setup"
WANT_STAMP="$ROOT $RECIPE"
env_is_complete() { "$PY" - "$ROOT" "$MMENGINE_VERSION" "$MMCV_VERSION" "$MMDET_VERSION" "$MMSEG_VERSION" <<'PYEOF' 2>/dev/null
import importlib.metadata as md, importlib.util, os, sys
if sys.path and sys.path[0] == '':
    sys.path.pop(0)  # look for inline_dense where it is installed, not in the current directory
root, engine, cv, det, seg = sys.argv[1:]
want = {'mmengine': engine, 'mmcv': cv, 'mmdet': det, 'mmsegmentation': seg}
assert all(md.version(name) == ver for name, ver in want.items())
for name in ('torch', 'timm', 'pycocotools', 'pytest', 'ftfy', 'regex', 'inline_dense'):
    md.version(name)
origin = importlib.util.find_spec('inline_dense').origin
assert os.path.realpath(origin).startswith(os.path.realpath(root) + os.sep)
import torch, mmcv._ext  # noqa: E401,F401  (mmcv built with its compiled ops, for this torch)
print(torch.__version__)
PYEOF
}
if [ "${SETUP_FORCE:-0}" != 1 ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT_STAMP" ] && torch_ver=$(env_is_complete); then
  save_template
  say "already set up in $VENV (torch $torch_ver, mmcv $MMCV_VERSION," \
      "mmdet $MMDET_VERSION, mmseg $MMSEG_VERSION); nothing to do in $(( $(date +%s) - T0 )) s"
  exit 0
fi
rm -f "$STAMP"

free=$(free_gib "$VENV")
[ "$free" -ge 3 ] || fail "only ${free} GiB free on the disk holding $VENV" \
  "a first install (torch + mmcv + mmdet + mmseg) needs about 8 GiB: free some space and run again"

# ---------------------------------------------------------------- torch (the user's one, if any)
if "$PY" -c 'import torch' 2>/dev/null; then
  say "keeping installed torch $("$PY" -c 'import torch; print(torch.__version__)')"
else
  say "installing $TORCH_PIN $TORCHVISION_PIN (several GiB of downloads on the first run)"
  "${PIP[@]}" install -q "$TORCH_PIN" "$TORCHVISION_PIN" || fail "installing torch failed" \
    "check network access to PyPI and free disk space (df -h), then run this script again"
fi
TORCH_INFO=$("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda or "none", int(torch.cuda.is_available()))') \
  || fail "torch is installed in $VENV but does not import (see above)" "repair or remove that torch, then run this script again"
read -r TORCH_VER TORCH_CUDA CUDA_AVAIL <<<"$TORCH_INFO"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# Every later pip call keeps this torch (nothing may up- or downgrade it behind the user's back)
# and re-resolves its own requirements (e.g. torch 2.14 needs setuptools >= 77).
TORCH_REQ=()
TORCH_DIST=$("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true)
if [ -n "$TORCH_DIST" ]; then
  TORCH_REQ=("torch==$TORCH_DIST")
  printf 'torch==%s\n' "$TORCH_DIST" >"$WORK/constraints.txt"
else
  say "WARNING: torch $TORCH_VER was not installed by pip; pip cannot protect it from being replaced"
  : >"$WORK/constraints.txt"
fi
PIPI=("${PIP[@]}" install -c "$WORK/constraints.txt")

# ---------------------------------------------------------------- mmcv with compiled ops (cached wheel)
if [ -z "${FORCE_CUDA:-}" ]; then
  if [ "$CUDA_AVAIL" = 1 ] && command -v nvcc >/dev/null; then FORCE_CUDA=1; else FORCE_CUDA=0; fi
fi
OPS=cpu; [ "$FORCE_CUDA" = 1 ] && OPS="cuda${TORCH_CUDA}"
KEY="mmcv-${MMCV_VERSION}_torch-${TORCH_VER}_py${PYV}_ops-${OPS}"
WHEEL_DIR="$CACHE/wheels/$KEY"

have_mmcv() { "$PY" - "$MMCV_VERSION" <<'PYEOF' 2>/dev/null
import importlib.metadata as md, sys
import torch, mmcv._ext  # noqa: E401,F401  (fails when the compiled ops are missing or built for another torch)
sys.exit(0 if md.version('mmcv') == sys.argv[1] else 1)
PYEOF
}

build_mmcv() {
  local cxx="${CXX:-g++}" std src log
  command -v "${cxx%% *}" >/dev/null || fail "no C++ compiler ($cxx) found; mmcv $MMCV_VERSION must be compiled once" \
    "Debian/Ubuntu: apt-get install -y build-essential; Fedora: dnf install gcc-c++" "then run this script again"
  "$PY" -c 'import os, sysconfig, sys; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || fail "Python's C headers (Python.h) are missing; mmcv $MMCV_VERSION's ops cannot be compiled" \
      "Debian/Ubuntu: apt-get install -y python${PYV}-dev (or python3-dev), then run this script again"
  free=$(free_gib "$WORK")
  [ "$free" -ge 2 ] || fail "only ${free} GiB free in $(dirname "$WORK") for the mmcv build" \
    "free space there, or set TMPDIR to a folder on a larger disk"
  # The C++ standard torch's headers need (torch >= 2.10: C++20; older ones: C++17).
  std=$("$PY" "$ROOT/tools/torch_cxx_std.py") || fail "torch $TORCH_VER's headers compile with neither C++17 nor C++20 using $cxx" \
    "a newer compiler is needed (g++ >= 10 for C++20): check '$cxx --version'"
  say "building mmcv $MMCV_VERSION from source (ops: $OPS, $std, ${MAX_JOBS:-$(nproc)} jobs); ~15-30 min on 2 cores, once per torch/Python/CUDA"
  "${PIP[@]}" install -q --no-warn-conflicts --target "$WORK/pins" "${BUILD_PINS[@]}" || fail "could not fetch the build tools (${BUILD_PINS[*]})" \
    "check network access to PyPI"
  "${PIP[@]}" download -q --no-deps --no-binary :all: "mmcv==$MMCV_VERSION" -d "$WORK" \
    || fail "could not download the mmcv $MMCV_VERSION source" "check network access to PyPI"
  tar -xzf "$WORK/mmcv-$MMCV_VERSION.tar.gz" -C "$WORK"
  src="$WORK/mmcv-$MMCV_VERSION"
  # mmcv's setup.py hard-codes -std=c++14/c++17; use what torch's headers need instead.
  sed -i -E "s/-std=c\+\+1[47]/-std=${std}/g" "$src/setup.py"
  log="$CACHE/logs/$KEY.log"
  mkdir -p "$(dirname "$log")" "$WHEEL_DIR"
  if ! (cd "$src" && PYTHONPATH="$WORK/pins" PATH="$WORK/pins/bin:$PATH" MMCV_WITH_OPS=1 FORCE_CUDA="$FORCE_CUDA" \
        MAX_JOBS="${MAX_JOBS:-$(nproc)}" "${PIP[@]}" wheel -v --no-build-isolation --no-deps -w "$WORK/out" .) >"$log" 2>&1; then
    printf '[setup] last compiler/linker errors from %s:\n' "$log" >&2
    grep -E "error:|Error|No space left|Killed|fatal" "$log" | tail -n 15 >&2 || tail -n 15 "$log" >&2
    fail "the mmcv build failed; full log: $log" \
      "'No space left on device': free disk space (or set TMPDIR to a larger disk) and run again" \
      "'Killed' / 'internal compiler error': not enough memory, run again with MAX_JOBS=1" \
      "other compiler errors: needs g++ >= 10 and torch's headers (torch $TORCH_VER); send the log with a bug report"
  fi
  # Copy, then rename: a cache entry is either complete or absent.
  cp "$WORK"/out/mmcv-*.whl "$WHEEL_DIR/.partial"
  mv "$WHEEL_DIR/.partial" "$WHEEL_DIR/$(basename "$WORK"/out/mmcv-*.whl)"
  say "cached $(ls "$WHEEL_DIR"/mmcv-*.whl)"
}

if have_mmcv; then
  say "mmcv $MMCV_VERSION with compiled ops already installed"
else
  if ls "$WHEEL_DIR"/mmcv-*.whl >/dev/null 2>&1; then
    say "using the cached mmcv build $(ls "$WHEEL_DIR"/mmcv-*.whl)"
  else
    build_mmcv
  fi
  # Its dependencies come with the pip call below.
  "${PIPI[@]}" -q --force-reinstall --no-deps "$WHEEL_DIR"/mmcv-*.whl || fail "installing mmcv from $WHEEL_DIR failed" \
    "delete $WHEEL_DIR and run this script again"
  MMCV_FROM="$WHEEL_DIR"
fi

# ---------------------------------------------------------------- mmengine, mmdet, mmseg, the rest, this package
"${PIPI[@]}" -q "${TORCH_REQ[@]}" "mmengine==$MMENGINE_VERSION" "mmcv==$MMCV_VERSION" "mmdet==$MMDET_VERSION" \
  "mmsegmentation==$MMSEG_VERSION" "${OTHER_REQS[@]}" \
  || fail "installing mmengine / mmdet / mmseg failed" "check network access to PyPI; the pip output above names the package"
# This package, editable (its requirements are all in the line above; pip check verifies).
"${PIPI[@]}" -q --no-deps --use-pep517 --no-build-isolation -e "$ROOT" \
  || fail "installing inline_dense from $ROOT failed (see above)" "check that $ROOT/setup.py is intact"

if [ -n "${MMCV_FROM:-}" ] && ! have_mmcv; then
  fail "mmcv was installed from $MMCV_FROM but its compiled ops do not load" \
    "the cached build may not match this torch: delete $MMCV_FROM and run this script again"
fi
if ! conflicts=$("${PIP[@]}" check 2>&1); then
  printf '%s\n' "$conflicts" >&2
  if [ "$VENV" = "$ROOT/.venv" ]; then
    fail "pip reports conflicting requirements in $VENV (above)" "delete $VENV and run this script again"
  fi
  say "WARNING: pip reports conflicts in your environment $VENV (above); the OpenMMLab stack may still work"
fi
"$PY" -c 'import torch, mmcv, mmcv.ops, mmdet, mmseg, inline_dense
print("[setup] ok: torch", torch.__version__, "| mmcv", mmcv.__version__, "| mmdet", mmdet.__version__, "| mmseg", mmseg.__version__)' \
  || fail "the stack was installed but does not import (see the error above)" "run: SETUP_FORCE=1 bash tools/setup_env.sh"
env_is_complete >/dev/null || fail "the installed environment does not match the pins" "run: SETUP_FORCE=1 bash tools/setup_env.sh"
printf '%s\n' "$WANT_STAMP" >"$STAMP"
save_template
say "done in $(( $(date +%s) - T0 )) s; environment: $VENV (activate: source $VENV/bin/activate)"
