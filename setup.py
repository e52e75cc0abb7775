"""inline_dense: InLine attention backbones for dense prediction.

``pip install .`` installs the torch-only core's requirements (torch, numpy;
requirements/runtime.txt): the backbones and the checkpoint loading. The extras add the rest:
``[mm]`` the OpenMMLab adapter's stack (mmengine, mmdet, mmsegmentation, pycocotools;
requirements/mm.txt) without mmcv, ``[lite]`` / ``[full]`` the same with mmcv-lite / a compiled
mmcv 2.1.0 (requiring plain ``mmcv`` would make pip compile it even when mmcv-lite is installed),
``[onedl]`` the maintained successors of that stack (onedl-mmengine, onedl-mmcv, onedl-mmdetection,
onedl-mmsegmentation: the same import names; a user who has them keeps them, as pip sees them
satisfied; onedl-mmcv is an sdist: ``MMCV_WITH_OPS=0 pip install "inline_dense[onedl]"`` builds it
without a compiler, and its ops come from inline_dense's stand-in), ``[timm]``, ``[smp]``. The
full development environment (pinned) is made by ``bash tools/setup_env.sh`` (``STACK=onedl`` for
the maintained stack).
"""
import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, 'README.md'), encoding='utf-8') as f:
    README = f.read()


def read_requirements(name):
    with open(os.path.join(HERE, 'requirements', name), encoding='utf-8') as f:
        return [line.split('#')[0].strip() for line in f if line.split('#')[0].strip()]


PTH = 'inline_dense_mmcv_hook.pth'
MM = read_requirements('mm.txt')
# The onedl stack by its own distribution names (``mmdet>=3.3`` would make pip install mmdet 3.3.0
# over onedl-mmdetection: both provide the ``mmdet`` package). Ranges: the releases requirements/
# lock-onedl.txt pins, up to the next minor release.
ONEDL = ['onedl-mmengine>=0.10.12,<0.11', 'onedl-mmcv>=2.3.6,<2.4', 'onedl-mmdetection>=3.5.1,<3.6',
         'onedl-mmsegmentation>=1.4.2,<1.5', 'imaug>=0.4', 'pycocotools>=2.0.8']


class BuildPyWithPth(build_py):
    """Puts inline_dense_mmcv_hook.pth at the wheel's root, i.e. in site-packages itself, the only
    place where Python reads .pth files (setuptools ships its distutils-precedence.pth the same
    way). Editable installs skip build outputs: there ``python -m inline_dense_mmcv_hook --install``
    writes it (tools/setup_env.sh does)."""

    def run(self):
        super().run()
        self.copy_file(os.path.join(HERE, PTH), os.path.join(self.build_lib, PTH), preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH)]


setup(
    name='inline_dense',
    version='0.1.0',
    description='InLine attention backbones (InLine-Swin, -PVT, -CSwin) for dense prediction: torch, '
                'MMDetection 3.x and MMSegmentation 1.x',
    long_description=README,
    long_description_content_type='text/markdown',
    packages=find_packages(include=['inline_dense', 'inline_dense.*']),
    py_modules=['inline_dense_mmcv_hook'],
    cmdclass={'build_py': BuildPyWithPth},
    python_requires='>=3.9,<3.14',
    install_requires=read_requirements('runtime.txt'),  # the torch-only core
    extras_require={
        'mm': MM,                                 # inline_dense.openmmlab; mmcv from [lite] or [full]
        'lite': MM + ['mmcv-lite==2.1.0'],       # no compiler needed: ops served by inline_dense.ops
        'full': MM + ['mmcv==2.1.0'],            # compiled ops (DCN, CARAFE, ...): pip compiles it
        'onedl': ONEDL,                           # the maintained stack; the distributions are named, not mmdet
        'timm': ['timm>=1.0'],
        'smp': ['segmentation-models-pytorch>=0.6,<0.7', 'timm>=1.0'],  # smp 0.6 needs Python >= 3.10
        'tests': ['pytest>=7', 'pytest-timeout>=2', 'pytest-xdist>=3'],
        'tools': ['matplotlib'],
        'export': ['onnx>=1.17', 'onnxruntime>=1.20', 'onnxscript>=0.2'],  # tools/export_onnx.py
    },
)
