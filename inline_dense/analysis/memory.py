"""Peak memory of one measurement: resident memory on the CPU, torch's allocator on CUDA.

Both trackers are context managers whose ``peak`` (bytes) is the highest level reached
while active above the level at entry, and whose ``method`` names how it was read.
"""
import os
import resource
import sys
import threading
from typing import Any

import torch

# glibc hands blocks above 32 MiB back to the OS when freed (and trims the heap top), so the
# next pass page-faults (and zero-fills) them again: a cost per byte that, at high
# resolution, is paid by more and more of the activations. These keep them in the process, as
# runtime.allocator.keep_freed_memory() does: no mmapped block at all, whatever cap a glibc puts on
# the mmap threshold, and no trimming (which alone would return a freed block at the heap top): the
# threshold is SIZE_MAX, as glibc parses it (a size_t; 2 ** 31 - 1 still returned the free top above 2 GiB
# of each 1024x2048 UperNet pass, 2.6 GiB of page faults a pass).
KEEP_FREED_ENV = {'MALLOC_MMAP_MAX_': '0', 'MALLOC_TRIM_THRESHOLD_': str(2 ** 64 - 1)}


def current_rss() -> int:
    """Resident set size of this process in bytes (Linux /proc, else ru_maxrss)."""
    try:
        with open('/proc/self/statm') as f:
            return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
    except OSError:
        return _ru_maxrss()


def _ru_maxrss() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == 'darwin' else rss * 1024


def _read_hwm() -> int | None:
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class PeakRSS:
    """Peak resident memory of this process while active, in bytes above the level at entry.

    Linux: resets the kernel's high-water mark (``/proc/self/clear_refs``) on entry and reads
    ``VmHWM`` on exit, which catches every allocation, torch's included. Elsewhere a thread
    samples the RSS every millisecond (short peaks may be missed).
    """

    def __init__(self) -> None:
        self.peak = 0
        self.method = ''
        self._base = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sampled = 0

    def __enter__(self) -> 'PeakRSS':
        self._base = current_rss()
        try:
            with open('/proc/self/clear_refs', 'w') as f:
                f.write('5')
            self.method = 'VmHWM'
        except OSError:
            self.method = 'sampled'
            self._sampled = self._base
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self._sampled = max(self._sampled, current_rss())

    def __exit__(self, *exc: Any) -> None:
        if self.method == 'VmHWM':
            hwm = _read_hwm()
            top = hwm if hwm is not None else current_rss()
        else:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            top = max(self._sampled, current_rss())
        self.peak = max(0, top - self._base)


class PeakCuda:
    """Peak CUDA memory allocated by torch while active, above the level at entry, in bytes."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.peak = 0
        self.method = 'max_memory_allocated'

    def __enter__(self) -> 'PeakCuda':
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self._base = torch.cuda.memory_allocated(self.device)
        return self

    def __exit__(self, *exc: Any) -> None:
        torch.cuda.synchronize(self.device)
        self.peak = torch.cuda.max_memory_allocated(self.device) - self._base


def peak_tracker(device: torch.device) -> PeakCuda | PeakRSS:
    """The tracker that fits ``device``."""
    return PeakCuda(device) if device.type == 'cuda' else PeakRSS()
