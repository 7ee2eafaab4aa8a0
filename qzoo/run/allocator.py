"""The C allocator's settings for qzoo's allocation pattern.

Every replay batch allocates a few arrays of about 1 MB (32 stacked Atari states are
0.9 MB) and frees them a few milliseconds later. glibc serves allocations that large
with mmap and gives them back on free (or trims the heap top back to the system), so
each batch's fresh pages are faulted in again, which bounds the batches sampled per
second. Keeping up to 32 MB blocks on the heap and up to 256 MB of freed memory in the
process costs at most that much resident memory, next to a replay of gigabytes."""

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_done = False


def keep_freed_memory(mmap_threshold=32 << 20, trim_threshold=256 << 20):
    """Sets glibc's mmap and trim thresholds (mallopt) once per process; returns
    whether they are set (False off glibc, e.g. macOS or musl, where nothing changes)."""
    global _done
    if _done:
        return True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    _done = bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(
        mallopt(_M_TRIM_THRESHOLD, trim_threshold)
    )
    return _done
