"""Development machinery of this repository, kept out of the ``inline_dense`` wheel: it runs from
a checkout (``tools/gpu_check.py``), never from an installed package.

Importing it imports nothing from ``inline_dense``, so :mod:`.gpu_check.wheels` runs before
mmengine & co. are installed.
"""
