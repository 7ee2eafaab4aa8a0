"""Memory maps that do not keep what they touched resident.

Every page read or written through a memory map stays in the process's resident set
(as page-cache pages mapped in) until the kernel wants the memory back, so a process
that walks a large map shows all of it "resident" although none of it is its own memory.
`release` drops those pages from the process (madvise MADV_DONTNEED): they stay in the
page cache (a shared file mapping's written pages included, so nothing is lost) and
the next access is a minor fault.
"""

import mmap


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
