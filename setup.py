"""inline_dense: InLine attention backbones for MMDetection 3.x and MMSegmentation 1.x.

The full environment (torch, mmcv 2.1.0 compiled from source, mmdet, mmseg) is made by
``bash tools/setup_env.sh``; ``pip install -e .`` alone expects mmcv with its ops installed.
"""
import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))

with open(os.path.join(HERE, 'README.md'), encoding='utf-8') as f:
    README = f.read()
# Ranges in requirements/runtime.txt; the exact versions tools/setup_env.sh installs are in
# requirements/lock-py<version>.txt.
with open(os.path.join(HERE, 'requirements', 'runtime.txt'), encoding='utf-8') as f:
    REQUIREMENTS = [line.split('#')[0].strip() for line in f if line.split('#')[0].strip()]

setup(
    name='inline_dense',
    version='0.1.0',
    description='InLine attention backbones (InLine-Swin, InLine-PVT) for MMDetection 3.x and MMSegmentation 1.x',
    long_description=README,
    long_description_content_type='text/markdown',
    packages=find_packages(include=['inline_dense', 'inline_dense.*']),
    python_requires='>=3.9,<3.12',  # mmcv 2.1.0 / mmdet 3.3.0
    install_requires=REQUIREMENTS,
    extras_require={'tests': ['pytest>=7', 'pytest-timeout>=2'], 'tools': ['matplotlib']},
)
