"""How many CPU threads PyTorch may use (`--threads`).

PyTorch's default is one thread per core. Two runs on one machine then ask for twice
the cores there are, and OpenMP's threads wait for each other at every operation
while the scheduler runs the other run's: on a 2-core machine two DQN runs on Pong
went from 50 agent steps/s each to a few (BENCHMARKS.md). So qzoo sizes the threads
to the work instead, unless told otherwise:

- `--threads N` (N >= 1): exactly N.
- `--threads 0` (auto) with OMP_NUM_THREADS set: PyTorch's own choice, which follows it.
- auto otherwise: 1 for the small networks (mlp, minatar_cnn), whose operations are
  too short to share, and on a GPU, where the CPU only steps environments; for the
  Nature CNN on the CPU, half the cores (at most 4), leaving the rest to the
  environments and to other runs.

The count depends only on the config and the machine, never on the load, so that a
resumed run uses the same count (results on the CPU can depend on it).

`--pin-threads` (--acting async, --threads 1) puts the learner's thread on a core of
its own, for the length of each training phase. Left to the scheduler, the learner
shares both cores of a 2-core machine with the actor and the prefetcher: on Pong its
update took 2.6-3.0 ms more wall time than CPU time, pinned 0.7-0.8 ms, and the run
went from 175-204 to 202-213 agent steps/s (four alternating pairs, BENCHMARKS.md).
Pinning chooses among the cores
this process may use, so `taskset -c 2,3 qzoo train ... --pin-threads` keeps two runs
apart. Environment worker processes (`--actor-workers` above 1) are forked by the
actor's thread at each phase start, once it is pinned, and Linux gives a forked child
its parent thread's cores: they run on the actor's cores too. With `--threads 0` (auto)
it means one PyTorch thread per Python thread, as `--threads 1` does, whatever the
machine. Linux only (elsewhere the threads stay unpinned).
"""

import contextlib
import os

from qzoo.options import resolved_torso


def usable_cores():
    """Cores this process may run on (affinity and cgroup-limited sets included)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


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


def one_thread(config):
    """Whether the run needs one PyTorch thread whatever the machine: one per pinned
    Python thread (--pin-threads), or a process that forks (--actor-process)."""
    return config.pin_threads or config.actor_process


def auto_threads(config, domain, cuda):
    """The thread count `--threads 0` stands for (see the module docstring)."""
    if one_thread(config):
        return 1
    if cuda or resolved_torso(config, domain) not in ("nature_cnn", "dopamine_cnn"):
        return 1
    return max(1, min(4, usable_cores() // 2))


def apply(config):
    """Sets PyTorch's intra-op (and, once per process, inter-op) thread counts for
    `config`; returns the intra-op count."""
    import torch

    from qzoo import envs

    if config.threads == 0 and "OMP_NUM_THREADS" in os.environ and not one_thread(config):
        return torch.get_num_threads()
    cuda = config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
    n = config.threads or auto_threads(config, envs.resolve(config.env)[0], cuda)
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError:  # only possible before the first parallel work of a process
        pass
    return n
