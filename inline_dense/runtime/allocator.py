"""Opt-in: keep freed CPU memory in the process, so large activations are not page-faulted afresh each pass.

glibc's malloc serves blocks above its mmap threshold (32 MiB at most, adjusted upwards as blocks are freed)
with a fresh ``mmap`` and returns them to the kernel on ``free``; the heap top above ``M_TRIM_THRESHOLD`` is
trimmed too. The next forward pass then takes one minor page fault (and a zero-fill) per 4 KiB page of every
large activation: a cost per byte that grows with the pixels, on top of the arithmetic. At 1600x2432 a
stage-1 tensor of InLine-Swin-T is 93 MB in float32, above any threshold.

:func:`keep_freed_memory` changes the process-wide allocator (no large block is mmapped, the heap is never
trimmed): the resident memory stays at its peak. It is never called by importing the package; call it once,
early, in a long-running inference process (``tools/benchmark.py --keep-freed-memory`` sets the same through
glibc's environment variables for its workers). :func:`minor_faults` counts the faults, to see the effect.
"""
import ctypes
import ctypes.util
import resource

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library('c')
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, 'mallopt') else None


def keep_freed_memory() -> bool:
    """Asks glibc's malloc to serve every block from the heap and never trim it; True when it accepted
    (False elsewhere: musl, macOS, Windows, where nothing is changed)."""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 2 ** 31 - 1))


def minor_faults() -> int:
    """Minor page faults of this process so far (``getrusage``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
