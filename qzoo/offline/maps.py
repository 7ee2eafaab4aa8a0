"""Memory maps that do not keep what they touched resident.

Every page read or written through a memory map stays in the process's resident set
(as page-cache pages mapped in) until the kernel wants the memory back, so a process
that walks a large map shows all of it "resident" although none of it is its own memory.
`release` drops those pages from the process (madvise MADV_DONTNEED): they stay in the
page cache (a shared file mapping's written pages included, so nothing is lost) and
the next access is a minor fault.

`create_npy` makes an NPY file to write through a map with its disk space reserved
first: a write through a map onto a full disk is SIGBUS, which kills the process.
"""

import contextlib
import math
import mmap
import os

import numpy as np

from qzoo.files import reserve


def mapping(array):
    """The memory map under `array` (np.load's mmap_mode, open_memmap, or a view of
    them), or None for an array in memory."""
    while array is not None and not isinstance(array, mmap.mmap):
        array = getattr(array, "base", None)
    return array


def release(maps):
    """Drops the pages of `maps` from this process's resident set."""
    for m in maps:
        m.madvise(mmap.MADV_DONTNEED)


def create_npy(path, dtype, shape):
    """A new NPY file at `path` of `dtype` and `shape`, its space reserved on disk,
    memory-mapped for writing (np.lib.format.open_memmap's "r+"). On a full disk,
    UserError with the space needed and free, and no file left behind."""
    dtype = np.dtype(dtype)
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
              "shape": tuple(shape)}  # fmt: skip
    try:
        with open(path, "wb") as f:
            np.lib.format.write_array_header_1_0(f, header)
            f.flush()
            reserve(f.fileno(), f.tell() + math.prod(shape) * dtype.itemsize, path)
        return np.lib.format.open_memmap(path, "r+")
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(path)
        raise
