#!/usr/bin/env bash
# One-command, idempotent setup of the OpenMMLab stack + inline_dense.
#
# Installs into the ACTIVE virtual environment when one is active ($VIRTUAL_ENV),
# otherwise into .venv/ inside this checkout (created on first run, ignored by git).
#
#   bash tools/setup_env.sh                     # set up (first run compiles mmcv: ~15-35 min on 2 cores)
#   bash tools/setup_env.sh --plan              # say which path a setup would take now; change nothing
#   bash tools/setup_env.sh --check-first-time  # rehearse a first setup's index and build steps, no compile
#   bash tools/setup_env.sh --update-lock       # re-resolve requirements/lock-py<ver>.txt from the index
#
# Every version is pinned: torch/torchvision here, the build tools in requirements/build.txt
# (also inside pip's isolated build environments, through --build-constraint), everything else
# in requirements/lock-py<ver>.txt. The setup's recipe is the hash of its inputs (this script,
# tools/torch_cxx_std.py, requirements/*.txt); the caches are keyed on it, so a changed input
# means a setup from scratch (mmcv compiled again).
#
# Caches, in $INLINE_DENSE_CACHE (default ~/.cache/inline_dense):
#   wheels/<mmcv-torch-python-ops-recipe>/  the mmcv wheel built with that torch/Python/CUDA and recipe
#   venvs/<python-recipe>/                  a hard-linked snapshot of a finished .venv, from which a
#                                           fresh clone on the same machine (CI) starts in seconds
#   logs/                                   the mmcv build log and the output of a failed pip step
#
# Environment knobs:
#   PYTHON               interpreter used to create .venv (default python3; 3.9-3.11)
#   MAX_JOBS             parallel compile jobs for mmcv (default: number of cores)
#   FORCE_CUDA=1/0       build mmcv CUDA ops or not (default: auto, needs a GPU and nvcc)
#   SETUP_FORCE=1        skip the "already set up" shortcut and the snapshot; re-check with pip
set -euo pipefail

MODE=setup
case "${1:-}" in
  "") ;;
  --plan) MODE=plan ;;
  --check-first-time) MODE=check ;;
  --update-lock) MODE=lock ;;
  -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) printf 'tools/setup_env.sh: unknown option %s (see --help)\n' "$1" >&2; exit 2 ;;
esac

TORCH_PIN="torch==2.14.1"
TORCHVISION_PIN="torchvision==0.29.1"
MMENGINE_VERSION="0.10.7"
MMCV_VERSION="2.1.0"
MMDET_VERSION="3.3.0"
MMSEG_VERSION="1.2.2"
# Exact versions come from the lock file; these name what the environment needs.
# setuptools < 81: mmengine 0.10.7 resolves 'mmdet::'/'mmseg::' config paths with pkg_resources.
OTHER_REQS=("setuptools<81" "timm>=0.9" "pycocotools>=2.0.8" "pytest>=7" "pytest-timeout>=2" "ftfy" "regex")

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${INLINE_DENSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inline_dense}"
BUILD_TXT="$ROOT/requirements/build.txt"
T0=$(date +%s)

say()  { printf '[setup] %s\n' "$*"; }
fail() { printf '\n[setup] ERROR: %s\n' "$1" >&2; shift; for l in "$@"; do printf '[setup]   -> %s\n' "$l" >&2; done; exit 1; }
trap 'rc=$?; printf "\n[setup] ERROR: unexpected failure (exit %s) at tools/setup_env.sh line %s: %s\n" "$rc" "$LINENO" "$BASH_COMMAND" >&2' ERR
free_gib() { df -Pk "$1" | awk 'NR==2 {print int($4/1048576)}'; }
supported_python() { case "$1" in 3.9|3.10|3.11) return 0;; *) return 1;; esac; }
build_pin() { sed -n "s/^$1==\([^ #]*\).*/\1/p" "$BUILD_TXT"; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LOGS="$CACHE/logs"

# ---------------------------------------------------------------- the recipe (cache key)
RECIPE=$(cd "$ROOT" && for f in tools/setup_env.sh tools/torch_cxx_std.py requirements/*.txt; do
  printf '== %s\n' "$f"; cat "$f"; done | sha256sum | cut -c1-16)

# ---------------------------------------------------------------- pip steps that explain their failures
NSTEP=0
# pip_step PYTHON WHAT ARGS...: run pip; on failure show its output and name the cause.
pip_step() {
  local py="$1" what="$2" log; shift 2
  NSTEP=$((NSTEP + 1)); mkdir -p "$LOGS"; log="$LOGS/pip-step-$NSTEP.log"
  if "$py" -m pip --disable-pip-version-check "$@" >"$log" 2>&1; then rm -f "$log"; return 0; fi
  explain_pip_failure "$what" "$log"
}
explain_pip_failure() {
  local what="$1" log="$2" err
  printf '[setup] last lines of pip'"'"'s output (all of it: %s):\n' "$log" >&2
  grep -v '^WARNING: Location' "$log" | tail -n 25 | sed 's/^/    /' >&2
  if grep -qE 'Traceback \(most recent call last\)|subprocess-exited-with-error|metadata-generation-failed' "$log"; then
    err=$(grep -E '^[[:space:]]*[A-Za-z_.]*(Error|Exception):' "$log" | tail -n 1 | sed 's/^[[:space:]]*//' || true)
    fail "$what: a Python error in a build step (not a network problem): ${err:-see the output above}" \
      "the build tools are pinned in requirements/build.txt; if one of them no longer works here, report it with the output above"
  elif grep -qE 'ResolutionImpossible|conflicting dependencies' "$log"; then
    fail "$what: the pinned versions conflict (see above)" \
      "an active environment may hold packages that clash with requirements/lock-py*.txt: try without VIRTUAL_ENV (this script then makes .venv)"
  elif grep -qiE 'NewConnectionError|Max retries exceeded|Name or service not known|Temporary failure in name resolution|Connection (refused|reset)|Read timed out|SSLError|ProxyError|Network is unreachable' "$log"; then
    fail "$what: the package index could not be reached" "check network access to PyPI (behind a proxy: set HTTPS_PROXY), then run this script again"
  elif grep -qE 'No matching distribution|Could not find a version' "$log"; then
    fail "$what: the index has no matching release (see above)" \
      "a pinned release may be missing for this Python/platform; the pins are in tools/setup_env.sh and requirements/"
  elif grep -q 'No space left on device' "$log"; then
    fail "$what: the disk is full" "free disk space (df -h), then run this script again"
  fi
  fail "$what failed (see pip's output above)" "run this script again; if it fails the same way, report it with $log"
}

# ---------------------------------------------------------------- shared steps (setup and the checks)
ensure_pinned_pip() {  # PYTHON: --build-constraint needs pip >= 25.3; the pin makes every run use one pip
  local want; want=$(build_pin pip)
  [ "$("$1" -m pip --version 2>/dev/null | awk '{print $2}')" = "$want" ] && return 0
  pip_step "$1" "installing pip $want" install -q "pip==$want"
}
# write_constraints PYTHON TORCH_VERSION OUT: the installed torch plus the lock file; with a torch
# other than the pinned one (a user's active environment), its own requirements are left to it.
write_constraints() {
  "$1" - "${LOCK:-}" "$2" "${TORCH_PIN#torch==}" >"$3" <<'PYEOF'
import importlib.metadata as md, re, sys
lock, have, pinned = sys.argv[1:]
skip = {'torch', 'torchvision'}
if have and have != pinned:
    for req in md.requires('torch') or []:
        skip.add(re.split(r'[\s;<>=!~\[(]', req, maxsplit=1)[0].lower().replace('_', '-'))
if have:
    print(f'torch=={have}')
for line in (open(lock) if lock else []):
    line = line.split('#')[0].strip()
    if line and line.split('==')[0].lower() not in skip:
        print(line)
PYEOF
}
fetch_mmcv_source() {  # PYTHON DIR: the mmcv sdist (metadata prepared with the pinned build tools), unpacked
  pip_step "$1" "fetching and preparing the mmcv $MMCV_VERSION source" download -q --no-deps --no-binary :all: \
    --build-constraint "$BUILD_TXT" "mmcv==$MMCV_VERSION" -d "$2"
  tar -xzf "$2/mmcv-$MMCV_VERSION.tar.gz" -C "$2"
}
patch_mmcv_std() {  # SRC STD: mmcv's setup.py hard-codes -std=c++14/17; use what torch's headers need
  grep -qE -- '-std=c\+\+1[47]' "$1/setup.py" \
    || fail "mmcv $MMCV_VERSION's setup.py names no -std=c++14/17 flag: the C++ standard patch no longer applies" "report this with $1/setup.py"
  sed -i -E "s/-std=c\+\+1[47]/-std=$2/g" "$1/setup.py"
}
install_build_tools() {  # PYTHON DIR: the pinned setuptools/wheel/ninja in a folder only the mmcv build sees
  pip_step "$1" "installing the pinned build tools (requirements/build.txt)" install -q --no-warn-conflicts \
    --target "$2" -c "$BUILD_TXT" setuptools wheel ninja
}
build_mmcv_wheel() {  # PYTHON SRC PINS OUT WITH_OPS LOG: pip wheel without isolation, using the pinned tools
  (cd "$2" && PYTHONPATH="$3" PATH="$3/bin:$PATH" MMCV_WITH_OPS="$5" FORCE_CUDA="${FORCE_CUDA:-0}" \
    MAX_JOBS="${MAX_JOBS:-$(nproc)}" "$1" -m pip --disable-pip-version-check wheel -v --no-build-isolation --no-deps -w "$4" .) >"$6" 2>&1
}
# resolve PYTHON REPORT MMCV_SPEC CONSTRAINTS TORCH TORCHVISION: what a first setup would install
# (pip --dry-run from an empty environment), written as pip's JSON report.
resolve() {
  local c=(); [ -n "$4" ] && c=(-c "$4")
  pip_step "$1" "resolving the pinned stack" install -q --dry-run --ignore-installed --report "$2" "${c[@]}" \
    --build-constraint "$BUILD_TXT" "torch==$5" "torchvision==$6" "$3" "mmengine==$MMENGINE_VERSION" \
    "mmdet==$MMDET_VERSION" "mmsegmentation==$MMSEG_VERSION" "${OTHER_REQS[@]}"
}

# ---------------------------------------------------------------- which environment
if [ -n "${VIRTUAL_ENV:-}" ]; then VENV="$VIRTUAL_ENV"; else VENV="$ROOT/.venv"; fi
PY="$VENV/bin/python"
PY_BOOT="${PYTHON:-python3}"
if [ -x "$PY" ] && "$PY" -c pass 2>/dev/null; then BASE_PY="$PY"; else BASE_PY="$PY_BOOT"; fi
command -v "$BASE_PY" >/dev/null || fail "no '$BASE_PY' found" \
  "install Python 3.9, 3.10 or 3.11, or point PYTHON at one: PYTHON=/path/to/python3.11 bash tools/setup_env.sh"
PYV=$("$BASE_PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
supported_python "$PYV" || fail "Python $PYV ($BASE_PY) is not supported by mmcv 2.1.0 / mmdet 3.3.0" \
  "use Python 3.9, 3.10 or 3.11: PYTHON=python3.11 bash tools/setup_env.sh (or activate an environment with one)"
LOCK="$ROOT/requirements/lock-py$PYV.txt"
[ -f "$LOCK" ] || LOCK=""
torch_dist() { "$1" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true; }
template_for() {  # the snapshot folder for venvs made from this interpreter with this recipe
  "$1" -c 'import os, sys; print("py%d.%d" % sys.version_info[:2], os.path.realpath(sys.base_prefix))' \
    | { read -r v base; printf '%s/venvs/%s-%s-%s' "$CACHE" "$v" "$(printf '%s' "$base" | sha256sum | cut -c1-8)" "$RECIPE"; }
}
mmcv_key() {  # TORCH_VERSION OPS
  printf 'mmcv-%s_torch-%s_py%s_ops-%s_%s' "$MMCV_VERSION" "$1" "$PYV" "$2" "$RECIPE"
}

# ---------------------------------------------------------------- --plan
STAMP="$VENV/.inline_dense_setup"
WANT_STAMP="$ROOT $RECIPE"
if [ "$MODE" = plan ]; then
  tv=$(torch_dist "$BASE_PY"); tv=${tv:-${TORCH_PIN#torch==}}
  ops=cpu
  if [ "${FORCE_CUDA:-}" = 1 ] || { [ -z "${FORCE_CUDA:-}" ] && command -v nvcc >/dev/null && command -v nvidia-smi >/dev/null; }; then
    ops=cuda$("$BASE_PY" -c 'import torch; print(torch.version.cuda)' 2>/dev/null || echo '?')
  fi
  tmpl=$(template_for "$BASE_PY"); wheel_dir="$CACHE/wheels/$(mmcv_key "$tv" "$ops")"
  if [ "${SETUP_FORCE:-0}" != 1 ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT_STAMP" ]; then plan=ready
  elif [ "${SETUP_FORCE:-0}" != 1 ] && [ ! -x "$PY" ] && [ -z "${VIRTUAL_ENV:-}" ] && [ -f "$tmpl/.inline_dense_template" ]; then plan=snapshot
  elif ls "$wheel_dir"/mmcv-*.whl >/dev/null 2>&1; then plan=cached-mmcv
  else plan=from-scratch; fi
  printf 'plan: %s\nrecipe: %s\nenvironment: %s\nmmcv-wheels: %s\nsnapshot: %s\nlock: %s\n' \
    "$plan" "$RECIPE" "$VENV" "$wheel_dir" "$tmpl" "${LOCK:-none for Python $PYV}"
  exit 0
fi

# ---------------------------------------------------------------- --check-first-time / --update-lock
# Both work in a throw-away venv with an empty pip cache, so nothing cached hides a failure.
if [ "$MODE" = check ] || [ "$MODE" = lock ]; then
  export PIP_CACHE_DIR="$WORK/pip-cache" PIP_NO_INPUT=1
  LOGS="$WORK/logs"
  say "throw-away environment in $WORK (empty pip cache)"
  "$PY_BOOT" -m venv "$WORK/venv" || fail "could not create a virtual environment with $PY_BOOT" \
    "Debian/Ubuntu: apt-get install -y python3-venv"
  CPY="$WORK/venv/bin/python"
  ensure_pinned_pip "$CPY"
  tv=$(torch_dist "$BASE_PY"); tv=${tv:-${TORCH_PIN#torch==}}
  tvv=$("$BASE_PY" -c 'import importlib.metadata as m; print(m.version("torchvision"))' 2>/dev/null || echo "${TORCHVISION_PIN#torchvision==}")
  if [ "$MODE" = lock ]; then
    resolve "$CPY" "$WORK/report.json" "mmcv==$MMCV_VERSION" "" "$tv" "$tvv"
    out="$ROOT/requirements/lock-py$PYV.txt"
    "$CPY" - "$WORK/report.json" "$out" "$PYV" "$tv" <<'PYEOF'
import json, sys
report, out, pyv, torch = sys.argv[1:]
pins = sorted((i['metadata']['name'].lower().replace('_', '-'), i['metadata']['version'])
              for i in json.load(open(report))['install'])
head = (f'# Every package the setup installs besides torch and torchvision (pinned in tools/setup_env.sh),\n'
        f'# resolved together for torch {torch} / Python {pyv}. Used as pip constraints, so nothing the\n'
        f'# first setup fetches from the index floats. Regenerate with: bash tools/setup_env.sh --update-lock\n'
        f'# Changing this file changes the setup\'s cache key.\n')
with open(out, 'w') as f:
    f.write(head + ''.join(f'{n}=={v}\n' for n, v in pins if n not in ('torch', 'torchvision')))
print(f'[setup] wrote {len(pins) - 2} pins to {out}')
PYEOF
    exit 0
  fi
  [ -n "$LOCK" ] || fail "no lock file for Python $PYV (requirements/lock-py$PYV.txt)" "make one: bash tools/setup_env.sh --update-lock"
  say "1/4 fetch the mmcv $MMCV_VERSION sdist and prepare its metadata with the pinned build tools"
  fetch_mmcv_source "$CPY" "$WORK/src"
  src="$WORK/src/mmcv-$MMCV_VERSION"
  say "2/4 the C++ standard for torch's headers, and mmcv's setup.py patched to it"
  if "$BASE_PY" -c 'import torch' 2>/dev/null; then
    std=$("$BASE_PY" "$ROOT/tools/torch_cxx_std.py") || fail "the C++ standard probe failed (above)" "a newer compiler is needed (g++ >= 10)"
    say "    torch $tv: $std"
  else
    std=c++17; say "    SKIPPED the compiler probe: no torch installed in $VENV yet (run it after the setup); patching to $std"
  fi
  patch_mmcv_std "$src" "$std"
  say "3/4 install the pinned build tools and build the mmcv wheel with them (no torch here: nothing compiles)"
  install_build_tools "$CPY" "$WORK/pins"
  build_mmcv_wheel "$CPY" "$src" "$WORK/pins" "$WORK/out" 1 "$WORK/logs/mmcv-pure.log" && ls "$WORK"/out/mmcv-"$MMCV_VERSION"-*.whl >/dev/null 2>&1 \
    || { tail -n 25 "$WORK/logs/mmcv-pure.log" >&2; fail "building the mmcv $MMCV_VERSION wheel with the pinned build tools failed (above)"; }
  say "4/4 resolve every pin for torch $tv / Python $PYV against the index (pip --dry-run)"
  write_constraints "$BASE_PY" "$tv" "$WORK/constraints.txt"
  resolve "$CPY" "$WORK/report.json" "$(ls "$WORK"/out/mmcv-*.whl)" "$WORK/constraints.txt" "$tv" "$tvv"
  "$CPY" - "$WORK/report.json" "$LOCK" <<'PYEOF' || fail "the resolved stack and the lock file disagree (above)" "update the lock: bash tools/setup_env.sh --update-lock"
import json, sys
report, lock = sys.argv[1:]
pins = {}
for line in open(lock):
    line = line.split('#')[0].strip()
    if line:
        name, ver = line.split('==')
        pins[name.lower()] = ver
bad = []
got = json.load(open(report))['install']
for item in got:
    name, ver = item['metadata']['name'].lower().replace('_', '-'), item['metadata']['version']
    if name not in ('torch', 'torchvision') and pins.get(name) != ver:
        bad.append(f'{name} {ver} (lock: {pins.get(name, "not pinned")})')
for line in bad:
    print('[setup]   not as locked:', line, file=sys.stderr)
print(f'[setup]     {len(got)} packages resolve, all as locked' if not bad else '', end='\n' if not bad else '')
sys.exit(1 if bad else 0)
PYEOF
  say "first-time check passed in $(( $(date +%s) - T0 )) s"
  exit 0
fi

# ---------------------------------------------------------------- the setup: environment
TEMPLATE=""
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
  say "using the active virtual environment $VENV"
elif [ ! -x "$PY" ]; then
  tmpl=$(template_for "$PY_BOOT")
  if [ -f "$tmpl/.inline_dense_template" ] && [ "${SETUP_FORCE:-0}" != 1 ] && clone_template "$tmpl"; then
    say "started $VENV from the snapshot $tmpl"
  else
    say "creating virtual environment $VENV (Python $PYV)"
    "$PY_BOOT" -m venv "$VENV" || fail "could not create a virtual environment with $PY_BOOT" \
      "Debian/Ubuntu: apt-get install -y python3-venv (or python$PYV-venv), then run this script again"
  fi
fi
"$PY" -c 'pass' 2>/dev/null || fail "$PY does not run (was its base Python removed or upgraded?)" \
  "delete $VENV and run this script again"
[ "$VENV" = "$ROOT/.venv" ] && TEMPLATE=$(template_for "$PY")

# ---------------------------------------------------------------- shortcut: nothing to do
# The stamp names this checkout and the exact recipe; with it, only a quick import check runs
# (every pinned version present, mmcv's compiled ops load, inline_dense points here).
env_is_complete() { "$PY" - "$ROOT" "$MMENGINE_VERSION" "$MMCV_VERSION" "$MMDET_VERSION" "$MMSEG_VERSION" <<'PYEOF' 2>/dev/null
import importlib.metadata as md, importlib.util, os, sys
if sys.path and sys.path[0] == '':
    sys.path.pop(0)  # look for inline_dense where it is installed, not in the current directory
root, engine, cv, det, seg = sys.argv[1:]
want = {'mmengine': engine, 'mmcv': cv, 'mmdet': det, 'mmsegmentation': seg}
assert all(md.version(name) == ver for name, ver in want.items())
for name in ('torch', 'timm', 'pycocotools', 'pytest', 'pytest-timeout', 'ftfy', 'regex', 'inline_dense'):
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
[ -n "$LOCK" ] || say "WARNING: no lock file for Python $PYV (requirements/lock-py$PYV.txt): versions besides the named pins float"

free=$(free_gib "$VENV")
[ "$free" -ge 3 ] || fail "only ${free} GiB free on the disk holding $VENV" \
  "a first install (torch + mmcv + mmdet + mmseg) needs about 8 GiB: free some space and run again"
ensure_pinned_pip "$PY"

# ---------------------------------------------------------------- torch (the user's one, if any)
if "$PY" -c 'import torch' 2>/dev/null; then
  say "keeping installed torch $("$PY" -c 'import torch; print(torch.__version__)')"
else
  say "installing $TORCH_PIN $TORCHVISION_PIN (from PyPI: a CUDA build, ~3 GiB of wheels, ~5.5 GiB installed)"
  [ -n "$LOCK" ] && write_constraints "$PY" "" "$WORK/constraints.txt" || : >"$WORK/constraints.txt"
  pip_step "$PY" "installing torch" install -q -c "$WORK/constraints.txt" "$TORCH_PIN" "$TORCHVISION_PIN"
fi
TORCH_INFO=$("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda or "none", int(torch.cuda.is_available()))') \
  || fail "torch is installed in $VENV but does not import (see above)" "repair or remove that torch, then run this script again"
read -r TORCH_VER TORCH_CUDA CUDA_AVAIL <<<"$TORCH_INFO"
TORCH_DIST=$(torch_dist "$PY")
[ -n "$TORCH_DIST" ] || say "WARNING: torch $TORCH_VER was not installed by pip; pip cannot protect it from being replaced"
# Every later pip call keeps this torch and the locked versions.
write_constraints "$PY" "$TORCH_DIST" "$WORK/constraints.txt"
PIPI=(install -c "$WORK/constraints.txt" --build-constraint "$BUILD_TXT")

# ---------------------------------------------------------------- mmcv with compiled ops (cached wheel)
if [ -z "${FORCE_CUDA:-}" ]; then
  if [ "$CUDA_AVAIL" = 1 ] && command -v nvcc >/dev/null; then FORCE_CUDA=1; else FORCE_CUDA=0; fi
fi
OPS=cpu; [ "$FORCE_CUDA" = 1 ] && OPS="cuda${TORCH_CUDA}"
KEY=$(mmcv_key "${TORCH_DIST:-$TORCH_VER}" "$OPS")
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
  say "building mmcv $MMCV_VERSION from source (ops: $OPS, $std, ${MAX_JOBS:-$(nproc)} jobs); ~15-30 min on 2 cores, once per recipe"
  install_build_tools "$PY" "$WORK/pins"
  fetch_mmcv_source "$PY" "$WORK"
  src="$WORK/mmcv-$MMCV_VERSION"
  patch_mmcv_std "$src" "$std"
  log="$LOGS/$KEY.log"
  mkdir -p "$LOGS" "$WHEEL_DIR"
  if ! build_mmcv_wheel "$PY" "$src" "$WORK/pins" "$WORK/out" 1 "$log"; then
    printf '[setup] last compiler/linker errors from %s:\n' "$log" >&2
    grep -E "error:|Error|No space left|Killed|fatal" "$log" | tail -n 15 >&2 || tail -n 15 "$log" >&2
    fail "the mmcv build failed; full log: $log" \
      "'No space left on device': free disk space (or set TMPDIR to a larger disk) and run again" \
      "'Killed' / 'internal compiler error': not enough memory, run again with MAX_JOBS=1" \
      "other compiler errors: needs g++ >= 10 and torch's headers (torch $TORCH_VER); send the log with a bug report"
  fi
  # Copy, then rename: a cache entry is either complete or absent. Builds of other recipes go.
  cp "$WORK"/out/mmcv-*.whl "$WHEEL_DIR/.partial"
  mv "$WHEEL_DIR/.partial" "$WHEEL_DIR/$(basename "$WORK"/out/mmcv-*.whl)"
  for old in "$CACHE/wheels/${KEY%_*}"*; do [ "$old" = "$WHEEL_DIR" ] || rm -rf "$old"; done
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
  pip_step "$PY" "installing mmcv from $WHEEL_DIR" "${PIPI[@]}" -q --force-reinstall --no-deps "$WHEEL_DIR"/mmcv-*.whl
  MMCV_FROM="$WHEEL_DIR"
fi

# ---------------------------------------------------------------- mmengine, mmdet, mmseg, the rest, this package
say "installing mmengine $MMENGINE_VERSION, mmdet $MMDET_VERSION, mmseg $MMSEG_VERSION and the rest (versions from ${LOCK:-the index})"
pip_step "$PY" "installing mmengine / mmdet / mmseg" "${PIPI[@]}" -q "mmengine==$MMENGINE_VERSION" "mmcv==$MMCV_VERSION" \
  "mmdet==$MMDET_VERSION" "mmsegmentation==$MMSEG_VERSION" "${OTHER_REQS[@]}"
# This package, editable (its requirements are all in the line above; pip check verifies). It builds
# with the environment's own setuptools (pip refuses --build-constraint without build isolation).
pip_step "$PY" "installing inline_dense from $ROOT" install -q -c "$WORK/constraints.txt" --no-deps --use-pep517 \
  --no-build-isolation -e "$ROOT"

if [ -n "${MMCV_FROM:-}" ] && ! have_mmcv; then
  fail "mmcv was installed from $MMCV_FROM but its compiled ops do not load" \
    "the cached build may not match this torch: delete $MMCV_FROM and run this script again"
fi
if ! conflicts=$("$PY" -m pip --disable-pip-version-check check 2>&1); then
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
