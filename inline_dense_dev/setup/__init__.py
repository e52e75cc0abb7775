"""The development environment's setup (``bash tools/setup_env.sh``, which runs ``python -m
inline_dense_dev.setup``): :mod:`.env` its settings, errors and uv; :mod:`.mmcv_full` the compiled
mmcv option (``MMCV=full``), with :mod:`.torch_cxx_std`, the C++ standard probe it runs in the
environment; :mod:`.__main__` the entry. Imports go one way: ``__main__`` -> ``mmcv_full`` -> ``env``.
Standard library only (and :mod:`inline_dense_dev.uvlock`): it runs before anything is installed.
"""
