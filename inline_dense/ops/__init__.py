"""mmcv's compiled ops, served by torchvision and plain torch when only mmcv-lite is installed.

``ext.py`` is the stand-in for ``mmcv._ext``; ``inline_dense_mmcv_hook`` (a top-level module,
imported at interpreter start through a .pth file and by ``import inline_dense.openmmlab``) loads
it under that name when mmcv has no compiled extension. Nothing here imports mmcv (mmcv imports
the stand-in): ``python -m inline_dense_mmcv_hook`` says which ``mmcv._ext`` this environment uses,
and :mod:`inline_dense.openmmlab.mmcv_ops` asks mmcv.
"""
