"""The error the ``safetensors`` package raises for a damaged file.

``torch.load`` reads a ``.safetensors`` file through that package, whose ``SafetensorError``
derives from ``Exception`` only: without this, a damaged file would escape the loader's
"unreadable checkpoint" message as a raw error. Empty where the package is not installed.
"""

try:
    from safetensors import SafetensorError
    SAFETENSORS_ERRORS: tuple[type[BaseException], ...] = (SafetensorError,)
except ImportError:  # optional: torch reads .safetensors files only with it
    SAFETENSORS_ERRORS = ()
