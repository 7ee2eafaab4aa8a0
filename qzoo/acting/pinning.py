"""--pin-threads: the learner's thread on a core of its own and the actor's and the
prefetcher's on the others, for the length of each training phase (Linux; elsewhere the
threads stay unpinned). Left to the scheduler, the learner shares its core with the
actor and the prefetcher and waits for them within its updates. Pinning chooses among
the cores this process may use, so `taskset -c 2,3 qzoo train ... --pin-threads` keeps
two runs apart. Environment worker processes (`--actor-workers` above 1), forked by the
pinned actor thread at each phase start, inherit its cores. With `--threads 0` (auto)
it means one PyTorch thread per Python thread, as `--threads 1` does."""

import contextlib
import os


def pinned_cores():
    """(the learner's core, the actor's and prefetcher's cores) for --pin-threads: the
    first core this process may use and the rest; None with fewer than two, or where
    threads cannot be pinned."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    return ({cores[0]}, set(cores[1:])) if len(cores) > 1 else None


@contextlib.contextmanager
def pinned(cores):
    """Runs the calling thread on `cores` (None: anywhere, as it was), and gives it back
    its own set of cores after. On Linux, pid 0 names the calling thread, not the whole
    process."""
    if cores is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
