"""inline_dense: InLine attention backbones for MMDetection 3.x and MMSegmentation 1.x.

The full environment (torch, mmcv 2.1.0 compiled from source, mmdet, mmseg) is made by
``bash tools/setup_env.sh``; ``pip install -e .`` alone expects mmcv with its ops installed.
Ranges: what tools/setup_env.sh installs and the tests run on (upper end), down to the
oldest releases whose APIs the package uses (lower end).
"""
import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))

with open(os.path.join(HERE, 'README.md'), encoding='utf-8') as f:
    README = f.read()

setup(
    name='inline_dense',
    version='0.1.0',
    description='InLine attention backbones (InLine-Swin, InLine-PVT) for MMDetection 3.x and MMSegmentation 1.x',
    long_description=README,
    long_description_content_type='text/markdown',
    packages=find_packages(include=['inline_dense', 'inline_dense.*']),
    python_requires='>=3.9,<3.12',  # mmcv 2.1.0 / mmdet 3.3.0
    install_requires=[
        'torch>=2.1,<2.15',              # tested: 2.14.1; safe_load is a no-op before 2.6
        'mmengine>=0.10.4,<0.11',        # tested: 0.10.7 (its Runner checkpoint layout)
        'mmcv>=2.1.0,<2.2.0',            # tested: 2.1.0 with compiled ops; mmdet 3.3 refuses 2.2
        'mmdet>=3.3.0,<3.4',             # tested: 3.3.0
        'mmsegmentation>=1.2.2,<1.3',    # tested: 1.2.2
        'numpy>=1.23,<2.5',              # tested: 2.4 (what torch 2.14 brings)
        'pycocotools>=2.0.8',            # first release built for numpy 2
    ],
    extras_require={'tests': ['pytest>=7'], 'tools': ['matplotlib', 'timm>=0.9']},
)
