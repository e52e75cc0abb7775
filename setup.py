from setuptools import find_packages, setup

setup(
    name='inline_dense',
    version='0.1.0',
    description='InLine attention backbones (InLine-Swin, InLine-PVT) for MMDetection 3.x and MMSegmentation 1.x',
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['inline_dense', 'inline_dense.*']),
    python_requires='>=3.9,<3.12',
    install_requires=[
        'torch>=2.1,<2.15',
        'mmengine>=0.10.4,<0.11',
        'mmcv>=2.0.0,<2.2.0',
        'mmdet>=3.3.0,<3.4',
        'mmsegmentation>=1.2.2,<1.3',
        'numpy',
        'pycocotools',
    ],
    extras_require={'tests': ['pytest>=7'], 'tools': ['matplotlib', 'timm>=0.9']},
)
