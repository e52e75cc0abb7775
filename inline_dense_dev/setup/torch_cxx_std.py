"""Print the C++ standard (``c++17`` or ``c++20``) that the installed torch's headers
compile with. ``MMCV=full bash tools/setup_env.sh`` builds mmcv's ops with it (run as a script by
the environment's Python, :mod:`.mmcv_full`): torch >= 2.10 needs
C++20, older releases C++17, and mmcv 2.1.0's setup.py hard-codes an older standard.

It compiles a one-line probe including ``torch/extension.h`` with each standard in turn
and prints the first that works; exit status 1 when none does. A preprocessor-only pass
comes first: it is quick and already fails on torch's "C++20 ... is required" #error.
"""
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

STANDARDS = ('c++17', 'c++20')


def probe(cxx: list[str], std: str, includes: list[str], src: str) -> tuple[bool, str]:
    """(whether ``src`` compiles with ``-std=<std>``, the compiler's error output)."""
    for stage in ('-E', '-fsyntax-only'):
        cmd = [*cxx, f'-std={std}', stage, *includes, src]
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            return False, proc.stderr
    return True, ''


def main() -> int:
    from torch.utils.cpp_extension import include_paths

    cxx = shlex.split(os.environ.get('CXX', 'g++'))
    if not cxx or shutil.which(cxx[0]) is None:
        print(f'no C++ compiler {" ".join(cxx)!r} found: install one (Debian/Ubuntu: apt-get install -y '
              f'build-essential) or set CXX', file=sys.stderr)
        return 1
    includes = [f'-I{p}' for p in include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]
    errors = ''
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'probe.cpp')
        with open(src, 'w') as f:
            f.write('#include <torch/extension.h>\nint main() { return 0; }\n')
        for std in STANDARDS:
            ok, errors = probe(cxx, std, includes, src)
            if ok:
                print(std)
                return 0
    tail = '\n'.join(errors.strip().splitlines()[-8:])
    print(f'torch headers compile with none of {", ".join(STANDARDS)} using {" ".join(cxx)}; '
          f'last errors:\n{tail}', file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main())
