"""Keep freed CPU memory in the process, so large activations are not page-faulted afresh each pass.

glibc's malloc serves blocks above its mmap threshold (32 MiB at most, adjusted upwards as blocks are freed)
with a fresh ``mmap`` and returns them to the kernel on ``free``; the heap top above ``M_TRIM_THRESHOLD`` is
trimmed too. The next forward pass then takes one minor page fault (and a zero-fill) per 4 KiB page of every
large activation: a cost per byte that grows with the pixels, on top of the arithmetic. At 1600x2432 a
stage-1 tensor of InLine-Swin-T is 93 MB in float32, above any threshold.

:func:`keep_freed_memory` changes the process-wide allocator (no large block is mmapped, the heap is never
trimmed): the resident memory stays at its peak. The heap still grows over the first passes, faulting its
new pages once (a freed block's hole can be a little too small for torch's next aligned request of that
size); in the runs measured (docs/performance.md) the faults stopped within a few passes. Importing the
package never calls it. The tools apply it at their start when they run on the CPU (:func:`tool_default`:
``tools/test.py``, ``demo_toy.py``, ``train.py``; the benchmark sets the same through glibc's environment
variables for its workers); a library user opts in with one call, early in a long-running inference
process::

    from inline_dense.runtime.allocator import keep_freed_memory
    keep_freed_memory()

``INLINE_DENSE_KEEP_FREED=0`` in the environment keeps the tools on glibc's defaults. :func:`minor_faults`
counts the faults, to see the effect.
"""
import ctypes
import ctypes.util
import os
import resource
import sys
from typing import TextIO

OPT_OUT_ENV = 'INLINE_DENSE_KEEP_FREED'

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
    # -1 becomes SIZE_MAX in glibc (the threshold is a size_t): never trim. INT_MAX, the largest positive
    # int, would still trim a free heap top above 2 GiB, which a segmentor's pass at 2048x4096 leaves.
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, -1))


def minor_faults() -> int:
    """Minor page faults of this process so far (``getrusage``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def tool_default(device: str = 'cpu', stream: TextIO | None = None) -> bool:
    """What the tools do at their start: :func:`keep_freed_memory` for a run on the CPU, unless
    ``INLINE_DENSE_KEEP_FREED=0``; True when it is on. One line on ``stream`` (stderr) where the allocator
    cannot be told (not glibc)."""
    if not str(device).startswith('cpu') or os.environ.get(OPT_OUT_ENV, '1') == '0':
        return False
    kept = keep_freed_memory()
    if not kept:
        print('[allocator] not glibc: freed memory goes back to the system as the C library decides '
              '(activations may page-fault each pass)', file=stream or sys.stderr, flush=True)
    return kept
