"""The build step pyproject.toml cannot declare: inline_dense_mmcv_hook.pth at the wheel's root.

Python reads .pth files only from site-packages itself, so the file goes to the root of the wheel
(setuptools ships its distutils-precedence.pth the same way), in both kinds of wheel: a regular one
(``pip install .``) and the editable one (``pip install -e .``, ``uv sync``), whose root setuptools
gives to the ``install`` command. Everything else is in pyproject.toml.
"""
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = 'inline_dense_mmcv_hook.pth'


class BuildPyWithPth(build_py):
    def run(self) -> None:
        super().run()
        root = self.get_finalized_command('install').install_lib if self.editable_mode else self.build_lib
        self.copy_file(str(Path(__file__).with_name(PTH)), str(Path(root) / PTH), preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list:
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib) / PTH)]


setup(cmdclass={'build_py': BuildPyWithPth})
