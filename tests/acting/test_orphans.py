"""No child process outlives qzoo: the actor process and the environment workers die
with the learner's process however it dies (SIGKILL included), through Linux's
PR_SET_PDEATHSIG (qzoo/signals.py's die_with_parent). Real runs, real signals."""

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import REPO

from qzoo.signals import die_with_parent

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def _stat(pid):
    """(ppid, state) of process `pid`, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[1]), fields[0].decode()


def _alive(pid):
    stat = _stat(pid)
    return stat is not None and stat[1] not in "ZX"  # a zombie is dead, only not reaped


def _children(pid):
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        stat = _stat(int(name))
        if stat is not None and stat[0] == pid:
            found.append(int(name))
    return found


def _gone_within(pids, seconds):
    deadline = time.monotonic() + seconds
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _kill(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _train(tmp_path, acting, wrapper=None):
    """`qzoo train` of a long CartPole phase (minutes) with `acting` options, through
    `wrapper` (a script that ends by running the command line) when given."""
    start = ["-c", wrapper] if wrapper else ["-m", "qzoo"]
    argv = [sys.executable, *start, "train", "dqn", "--env", "CartPole-v1", *acting,
            "--iterations", "3", "--train-frames", "2000000", "--eval-frames", "100",
            "--replay-capacity", "5000", "--no-progress", "--no-tensorboard",
            "--run-dir", str(tmp_path / "run")]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=ENV)  # fmt: skip


def _kill_and_check(run, children):
    """The alive children of `run` (expecting `children`), then SIGKILL to `run`:
    every child must be gone, with no other signal than the kernel's death signal. (The
    bounds are on a broken test: on a loaded machine a start takes minutes, and a
    signalled process may wait seconds for a core; was 60 s and 5 s.)"""
    deadline, found = time.monotonic() + 600, []
    while len(found) < children and time.monotonic() < deadline:
        assert run.poll() is None, "the run ended"
        time.sleep(0.2)
        found = [p for p in _children(run.pid) if _alive(p)]
    try:
        assert len(found) == children, f"expected {children} children, found {found}"
        assert run.poll() is None
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        assert _gone_within(found, 120.0) == [], "children outlived the run"
    finally:
        _kill(p for p in found if _alive(p))


# The learner takes the ring's `read` lock in the middle of training phase 1, says so
# and sleeps: the actor, which reads `read` under its lock at every step, blocks on it
# and never reaches its check of the learner's pid.
HOLD_THE_RING = textwrap.dedent("""
    import time
    from qzoo.acting import process_channels

    take, calls = process_channels.Ring.take, [0]

    def take_then_hold(self):
        calls[0] += 1
        if calls[0] == 200:  # well into the phase: acting, storing, learning
            self.read.get_lock().acquire()
            print("holding the ring's lock", flush=True)
            time.sleep(600)
        return take(self)

    process_channels.Ring.take = take_then_hold
    from qzoo.cli.main import entry

    entry()
""")


@linux
def test_sigkill_of_a_learner_holding_the_rings_lock_leaves_no_actor_behind(tmp_path):
    run = _train(tmp_path, ["--acting", "async", "--actor-process"], HOLD_THE_RING)
    try:
        assert any(line.strip() == "holding the ring's lock" for line in run.stdout)
        time.sleep(0.5)  # the actor reaches the lock
        _kill_and_check(run, 1)
    finally:
        run.kill()
        run.wait()


@linux
def test_sigkill_of_a_run_with_environment_workers_leaves_none_behind(tmp_path):
    run = _train(tmp_path, ["--acting", "parallel", "--actor-workers", "2", "--num-envs", "2"])
    try:
        checkpoint = tmp_path / "run" / "checkpoints" / "latest.safetensors"
        deadline = time.monotonic() + 600
        while not checkpoint.exists() and time.monotonic() < deadline:  # past iteration 0
            assert run.poll() is None, "the run ended"
            time.sleep(0.2)
        time.sleep(1.0)  # into iteration 1: its two workers step environments
        _kill_and_check(run, 2)
    finally:
        run.kill()
        run.wait()


# A parent that holds a lock its child waits for (the ring's, in the actor process),
# then is SIGKILLed: the child, blocked in the lock, never checks getppid.
HOLDER = textwrap.dedent("""
    import multiprocessing, os, sys, time
    from qzoo.signals import die_with_parent

    ctx = multiprocessing.get_context("fork")
    lock = ctx.Lock()
    lock.acquire()
    parent = os.getpid()

    def child(protect):
        if protect:
            die_with_parent(parent)
        lock.acquire()  # blocks for good: the parent never releases it

    process = ctx.Process(target=child, args=(sys.argv[1] == "protected",))
    process.start()
    print(process.pid, flush=True)
    time.sleep(120)
""")


@linux
@pytest.mark.parametrize("protect", ["protected", "unprotected"])
def test_a_child_blocked_on_its_killed_parents_lock_dies_only_with_the_death_signal(protect):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, protect], stdout=subprocess.PIPE,
                              text=True, env=ENV)  # fmt: skip
    child = None
    try:
        child = int(holder.stdout.readline())
        time.sleep(0.5)  # blocked in the lock
        assert _alive(child)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        # Protected, it dies (however long a loaded machine takes to run it); unprotected,
        # the orphan waits on: what the actor process did before.
        left = _gone_within([child], 120.0 if protect == "protected" else 1.5)
        assert left == ([] if protect == "protected" else [child])
    finally:
        holder.kill()
        holder.wait()
        if child is not None:
            _kill([child])


def test_a_child_whose_parent_is_already_gone_exits_at_once():
    """The race: a parent that died between the fork and the prctl call sent no signal;
    the child sees another parent and exits (code 1) instead of running on."""
    ctx = multiprocessing.get_context("fork")
    mine = ctx.Process(target=die_with_parent, args=(os.getpid(),))
    other = ctx.Process(target=die_with_parent, args=(os.getpid() + 1_000_000_000,))
    for process in (mine, other):
        process.start()
        process.join(120)
    assert (mine.exitcode, other.exitcode) == (0, 1)


# A GPU learner's actor comes from the forkserver (acting/process.py's start_context),
# here forced on the CPU: the actor is the forkserver's child, not the learner's.
FROM_THE_FORKSERVER = textwrap.dedent("""
    import multiprocessing
    from qzoo.acting import process

    def forkserver(device):
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([process.__name__])
        return ctx

    process.start_context = forkserver
    from qzoo.cli.main import entry

    entry()
""")


@linux
def test_sigkill_of_a_learner_leaves_no_forkserver_or_actor_behind(tmp_path):
    run = _train(tmp_path, ["--acting", "async", "--actor-process"], FROM_THE_FORKSERVER)
    try:
        deadline, found = time.monotonic() + 600, []
        while not found and time.monotonic() < deadline:  # the forkserver's actor acts
            assert run.poll() is None, "the run ended"
            time.sleep(0.2)
            found = [(server, actor) for server in _children(run.pid)
                     for actor in _children(server) if _alive(actor)]  # fmt: skip
        assert found, "no actor under a forkserver"
        time.sleep(0.5)
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        assert _gone_within(list(found[0]), 120.0) == [], "the forkserver or actor outlived the run"
    finally:
        run.kill()
        run.wait()
        if found:
            _kill(p for p in found[0] if _alive(p))


@linux
@pytest.mark.parametrize("pidfd", [True, False])
def test_die_with_ends_a_process_when_one_it_is_not_the_child_of_ends(pidfd):
    """qzoo.signals.die_with: through the pidfd, or without one (an old kernel, a
    sandbox refusing the call) by asking every half second."""
    from qzoo.signals import die_with

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ctx = multiprocessing.get_context("fork")

    def child():
        if not pidfd:

            def refused(pid):
                raise OSError(38, "Function not implemented")

            os.pidfd_open = refused
        die_with(sleeper.pid)
        time.sleep(600)  # killed below: ends here only if die_with failed
        os._exit(0)

    process = ctx.Process(target=child)
    process.start()
    try:
        time.sleep(0.5)
        assert process.is_alive()
        sleeper.kill()
        sleeper.wait()
        process.join(120)  # die_with's thread needs a core; polling, half a second more
        assert process.exitcode == 1
    finally:
        sleeper.kill()
        process.kill()
        process.join()
