"""How many CPU threads PyTorch may use (`--threads`).

PyTorch's default is one thread per core. Two runs on one machine then ask for twice
the cores there are, and OpenMP's threads wait for each other at every operation
while the scheduler runs the other run's, so both slow to a crawl. So qzoo sizes the
threads to the work instead, unless told otherwise: `--threads N` (N >= 1) is exactly
N; `--threads 0` (auto) with OMP_NUM_THREADS set is PyTorch's own choice, which follows
it; auto otherwise is `auto_threads`'s rule (one thread for small networks, the free
cores for the large CNNs on a CPU).

A run's results on the CPU can depend on its thread count, and the load a start
measures does not say what an earlier start chose. So `qzoo train` records the count a
run ran with (run/thread_record.py), and an auto resume on the CPU uses it. `qzoo
bench` and the tools measure afresh and record nothing. The learner's thread on a core
of its own (--pin-threads) is acting/pinning.py's."""

import contextlib
import os
import sys
import tempfile
import time

from qzoo.configuration.validate import resolved_torso, usable_cores

MOST = 4  # auto's largest count
WINDOW = 0.25  # seconds between the two reads of /proc/stat
BIG = ("nature_cnn", "dopamine_cnn")  # the torsos whose operations are worth sharing
LOCK = os.path.join(tempfile.gettempdir(), "qzoo-threads.lock")  # see one_at_a_time


def one_thread(config):
    """Whether the run needs one PyTorch thread whatever the machine: one per pinned
    Python thread (--pin-threads), or a process that forks (--actor-process)."""
    return config.pin_threads or config.actor_process


def read_proc_stat():
    """/proc/stat's text, None where it cannot be read (macOS, Windows)."""
    try:
        with open("/proc/stat") as f:
            return f.read()
    except OSError:
        return None


def cpu_times(text):
    """{'cpu': (busy, total), 'cpu0': ..., ...} in jiffies from /proc/stat's text. Idle
    is idle + iowait; the total is user to steal (guest time is already in user)."""
    times = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 5 or not fields[0].startswith("cpu"):
            continue
        try:
            values = [int(v) for v in fields[1:9]]
        except ValueError:
            continue
        total, idle = sum(values), sum(values[3:5])
        times[fields[0]] = (total - idle, total)
    return times


def busy_cores(cores=None, window=WINDOW, read=read_proc_stat, sleep=time.sleep):
    """How much of `cores` (default: the usable ones) the machine keeps busy over
    `window` seconds, in cores (a float): the busy fraction of each core's jiffies,
    summed, or the whole machine's busy fraction times len(cores) where /proc/stat does
    not list them one by one. None where /proc/stat cannot be read."""
    first = read()
    if first is None:
        return None
    cores = sorted(os.sched_getaffinity(0)) if cores is None else sorted(cores)
    sleep(window)
    second = read()
    if second is None:
        return None
    before, after = cpu_times(first), cpu_times(second)

    def busy_fraction(name):
        if name not in before or name not in after:
            return None
        busy, total = (a - b for a, b in zip(after[name], before[name]))
        return None if total <= 0 else min(1.0, max(0.0, busy / total))

    each = [busy_fraction(f"cpu{c}") for c in cores]
    if None not in each:
        return sum(each)
    whole = busy_fraction("cpu")
    return None if whole is None else whole * len(cores)


def half_cores():
    """Auto where free cores cannot be measured: half the usable cores, 1 to MOST."""
    return max(1, min(MOST, usable_cores() // 2))


def free_threads(config):
    """(count, note) for a Nature CNN on the CPU: the usable cores less those other
    processes keep busy, rounded, less one for --acting async's actor thread, 1 to
    MOST; half the usable cores where the load cannot be measured. `note` says why,
    where other processes' load lowered the count (else None)."""
    if config.ray:  # a Ray run's actors start after this
        return half_cores(), None
    usable = usable_cores()
    with one_at_a_time():
        busy = busy_cores()
    if busy is None:
        return half_cores(), None
    own = 1 if config.acting == "async" and not config.deterministic else 0
    count = max(1, min(MOST, int(usable - busy + 0.5) - own))
    if count >= min(MOST, usable - own):
        return count, None
    s = "" if count == 1 else "s"
    return count, (f"--threads auto: {count} thread{s}, as other processes keep "
                   f"{busy:.1f} of the {usable} usable cores busy; --threads N sets it")  # fmt: skip


@contextlib.contextmanager
def one_at_a_time(wait=5.0):
    """Holds a lock on LOCK (flock) while auto measures, so that runs started together
    measure one after another, each seeing the load of those before rather than their
    sleep (which would give each every core). Goes on without it after `wait` seconds,
    or where the lock cannot be had."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    fd = None
    for flags in (os.O_RDONLY | os.O_CREAT, os.O_RDONLY):  # another user's, in a protected /tmp
        with contextlib.suppress(OSError):
            fd = os.open(LOCK, flags, 0o666)
            break
    if fd is None:
        yield
        return
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


def on_gpu(config):
    """Whether the run's networks live on a GPU."""
    import torch

    return config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())


def auto_threads(config, domain, cuda, resumed=None, notes=None):
    """The thread count `--threads 0` stands for: 1 for the small networks (mlp,
    minatar_cnn), whose operations are too short to share, and on a GPU, where the CPU
    only steps environments; for the Nature and Dopamine CNNs on the CPU, the cores that
    are free when the process starts (at most MOST): the usable cores less what other
    processes keep busy, from two reads of /proc/stat WINDOW seconds apart, less one for
    --acting async's actor thread. A lone run so gets every core, and a run started
    beside a busy one leaves it its cores; runs started together measure one after
    another (`one_at_a_time`), or each would see the others asleep. Where /proc/stat
    cannot be read (macOS), and with --ray (whose actors start later), half the usable
    cores. The price of keeping a resumed run's count: a run that started alone keeps it
    when another starts beside it, and both then run slower than with a thread each.

    `resumed`: for a resumed run, the count it last ran with on the CPU (0 for a run saved
    without that record: half the usable cores, as it started); None for a new run (and
    the tools). Why the count is below the usable cores, where others' load made it so,
    goes onto the list `notes`."""
    if one_thread(config) or cuda:
        return 1
    if resumed:
        return min(resumed, usable_cores())  # fewer cores: another machine
    if resolved_torso(config, domain) not in BIG:
        return 1
    if resumed == 0:
        return half_cores()
    count, note = free_threads(config)
    if note and notes is not None:
        notes.append(note)
    return count


def apply(config, resumed=None, notes=None):
    """Sets PyTorch's intra-op (and, once per process, inter-op) thread counts for
    `config`; returns the intra-op count. `resumed`: as for auto_threads (qzoo train
    passes thread_record.saved_threads's answer). Auto's note goes to stderr, or onto
    the list `notes` where one is given (qzoo train prints it once the run's checks
    pass)."""
    import torch

    from qzoo import envs

    if config.threads == 0 and "OMP_NUM_THREADS" in os.environ and not one_thread(config):
        return torch.get_num_threads()
    n, said = config.threads, []
    if not n:
        n = auto_threads(config, envs.resolve(config.env)[0], on_gpu(config), resumed, said)
    if notes is None:
        for note in said:
            print(f"qzoo: note: {note}", file=sys.stderr)
    else:
        notes += said
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError:  # only possible before the first parallel work of a process
        pass
    return n
