"""Print the C++ standard flag value (``c++17`` or ``c++20``) that the installed
torch's headers compile with. Used by ``tools/setup_env.sh`` to build mmcv.

It compiles a one-line probe that includes ``torch/extension.h`` with each
standard in turn and prints the first that works.
"""
import os
import subprocess
import sys
import sysconfig
import tempfile

from torch.utils.cpp_extension import include_paths


def main() -> int:
    cxx = os.environ.get('CXX', 'g++')
    incs = [f'-I{p}' for p in include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'probe.cpp')
        with open(src, 'w') as f:
            f.write('#include <torch/extension.h>\nint main() { return 0; }\n')
        for std in ('c++17', 'c++20'):
            cmd = [cxx, f'-std={std}', '-fsyntax-only', *incs, src]
            if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                print(std)
                return 0
    print('torch headers compile with neither c++17 nor c++20', file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main())
