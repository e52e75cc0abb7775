# Sourced by the CI steps: a scratch folder removed on exit ($scratch), a folder of cc/gcc/g++/c++
# that fail ($no_compiler: put it first on PATH for a setup that must need no compiler), and
# find_python X.Y (python X.Y from PATH, else pyenv's newest X.Y; empty when there is none).
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
no_compiler="$scratch/no-compiler"
mkdir -p "$no_compiler"
for c in cc gcc g++ c++; do
  printf '#!/bin/sh\necho "CI: no C/C++ compiler here ($0)" >&2\nexit 1\n' >"$no_compiler/$c"
  chmod +x "$no_compiler/$c"
done

find_python() {
  local want=$1 root candidate
  for candidate in "python$want" $(ls -d "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/"$want"*/bin/python"$want" 2>/dev/null | sort -V -r); do
    if "$candidate" -c "import sys; assert '%d.%d' % sys.version_info[:2] == '$want'" 2>/dev/null; then
      command -v "$candidate"; return
    fi
  done
}

# The Pythons pyproject.toml admits: the lowest and the newest (requires-python ">=3.A,<3.B").
python_floor() { sed -n 's/^requires-python = ">=\([0-9.]*\),.*/\1/p' pyproject.toml; }
python_newest() { sed -n 's/^requires-python = ">=[0-9.]*,\s*<3\.\([0-9]*\)".*/\1/p' pyproject.toml | awk '{print "3." $1 - 1}'; }
