"""Ctrl-C while `qzoo train --ray` starts its local Ray instance (cluster.py).

Fast (Linux, no Ray): stop_session_processes ends a process tree started after `since`
(SIGTERM, then SIGKILL for what ignores it) and an orphan holding a file in this
process's session folder, and leaves alone an older child and another session's orphan.
Slow (a real local instance, the CLI in a subprocess, ~10 s each on 2 cores): ray.init
held in Node.start_ray_processes (after the GCS, the raylet and its agents are started)
and interrupted there by a second Ctrl-C, as Ray itself would leave the agents orphaned
for a minute: exit 130, one line, no process of the session left; and a single Ctrl-C,
held until ray.init returns, stops the instance the same way. And a run on Ray stopped
by Ctrl-C or SIGTERM, then a second Ctrl-C while Ray shuts down at exit: the shutdown
goes on to its end, no process of the session left.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import REPO

from qzoo.distributed import sweep
from qzoo.distributed.sweep import _stat, clock_ticks, session_processes, stop_session_processes

ROOT = REPO
LINE = "qzoo: interrupted while starting Ray; stopped its processes"

linux = pytest.mark.skipif(clock_ticks() is None, reason="needs Linux /proc")


def _child_env():
    """The environment of a `qzoo train --ray` child: this checkout first on its path
    (its local Ray instance runs its workers at its own niceness: cluster.worker_niceness)."""
    path = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return {**os.environ, "PYTHONPATH": path}


def _alive(pid, start):
    """Whether process `pid` still runs (not a zombie) as the one started at `start`."""
    try:
        tick, _, state = _stat(pid)
    except (OSError, ValueError, IndexError):
        return False
    return tick == start and state not in "ZX"


def _kill(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _orphan(tmp_path, pid):
    """An orphaned `sleep` (its shell exits at once) whose stdout is a file in a session
    folder named as Ray names the one process `pid` starts; returns its pid."""
    logs = tmp_path / f"session_2026-01-01_00-00-00_123456_{pid}" / "logs"
    logs.mkdir(parents=True)
    out = subprocess.run(
        ["sh", "-c", f"sleep 60 > {logs}/agent.out 2>&1 & echo $!"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(out.stdout)


@linux
def test_stop_session_processes_ends_the_new_tree_and_this_sessions_orphans(tmp_path,
                                                                          monkeypatch):  # fmt: skip
    older = subprocess.Popen(["sleep", "60"])
    time.sleep(0.05)  # a clock tick (10 ms) or more before `since`
    since = clock_ticks()
    time.sleep(0.02)
    # A child and grandchild that ignore SIGTERM (the ignoring survives exec).
    tree = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 60 & wait"])
    mine = _orphan(tmp_path / "mine", os.getpid())
    other = _orphan(tmp_path / "other", 999_999_999)  # another run's session
    starts = {}
    try:
        deadline = time.monotonic() + 600  # a bound on a broken test (under load)
        while len(session_processes(since)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)  # the grandchild `sleep` started
        found = session_processes(since)
        assert tree.pid in found and mine in found, found
        assert older.pid not in found and other not in found, found
        assert len(found) == 3, found  # the shell, its sleep, the orphan
        starts = {pid: _stat(pid)[0] for pid in (older.pid, other)} | found
        # SIGTERM to each, then after the 0.5-s grace SIGKILL to those left: each signal
        # once, in that order (was a bound of 6 s on the whole: not certain under load;
        # here every one must be gone, however long the machine takes to end them).
        sent, signal_ = [], sweep._signal
        monkeypatch.setattr(sweep, "_signal", lambda pid, start, how: sent.append(
            (pid, how)) or signal_(pid, start, how))  # fmt: skip
        assert stop_session_processes(since, grace=0.5, timeout=600) == []
        assert {p for p, how in sent if how == signal.SIGTERM} == set(found)
        killed = [p for p, how in sent if how == signal.SIGKILL]
        assert tree.pid in killed and sent.index((tree.pid, signal.SIGTERM)) < sent.index(
            (tree.pid, signal.SIGKILL))  # fmt: skip
        assert not any(_alive(pid, found[pid]) for pid in found)
        assert _alive(older.pid, starts[older.pid]) and _alive(other, starts[other])
        assert tree.wait(timeout=600) == -signal.SIGKILL  # SIGTERM was ignored
    finally:
        _kill(pid for pid, start in starts.items() if _alive(pid, start))
        _kill([older.pid, tree.pid])
        older.wait()
        tree.wait()


def test_session_processes_without_proc_is_empty():
    assert session_processes(None) == {}
    assert stop_session_processes(None) == []


# The CLI in a subprocess, Ray's Node.start_ray_processes made to wait, once it returns
# (the GCS, the raylet and its agents started, ray.init not returned), until the file
# `argv[1]` exists: a Ctrl-C sent before the test makes it lands inside ray.init,
# deterministically, however loaded the machine (a bound of 600 s ends a broken test).
CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from ray._private import node

    # Ctrl-C raises KeyboardInterrupt, as in a terminal, even where the test runs with
    # SIGINT ignored (a shell's background job), which Python would otherwise keep.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    start, release = node.Node.start_ray_processes, sys.argv.pop(1)

    def start_ray_processes(self):
        start(self)
        print("ray processes started", flush=True)
        deadline = time.monotonic() + 600
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.05)

    node.Node.start_ray_processes = start_ray_processes
    from qzoo.cli.main import entry

    entry()
""")


def _agents(pid, since):
    """{pid: start} of the Ray agents of the session process `pid` started."""
    found = session_processes(since, pid)
    agents = {}
    for p, start in found.items():
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if b"agent" in f.read().lower():
                    agents[p] = start
        except OSError:
            continue
    return agents


def _interrupted_start(tmp_path, interrupts, agents):
    """Runs `qzoo train` with --ray whose ray.init waits once the node's processes are
    started; then (once its two agents run, with `agents`) sends `interrupts` SIGINTs
    half a second apart, and lets ray.init go on. Returns (exit status, stderr, {pid:
    start} of the session's processes seen before the interrupt, those alive after the
    exit)."""
    ray = pytest.importorskip("ray")
    from ray._private import node

    if not hasattr(node.Node, "start_ray_processes"):
        pytest.skip(f"Ray {ray.__version__} has no Node.start_ray_processes to hold")
    env = _child_env()
    argv = ["train", "dqn", "--env", "CartPole-v1", "--ray", "--iterations", "1",
            "--run-dir", str(tmp_path / "run")]  # fmt: skip
    since = clock_ticks()
    release = tmp_path / "release"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(release), *argv], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen = {}
    try:
        for line in child.stdout:
            if line.strip() == "ray processes started":
                break
        deadline = time.monotonic() + 600  # a bound on a broken test: minutes under load
        while agents and len(_agents(child.pid, since)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not agents or len(_agents(child.pid, since)) == 2, "Ray's agents did not start"
        seen = session_processes(since, child.pid)
        for i in range(interrupts):
            if i:
                time.sleep(0.5)
            child.send_signal(signal.SIGINT)
        release.touch()  # the signals are pending or handled: ray.init may return
        _, err = child.communicate(timeout=600)
        left = {p: s for p, s in seen.items() if _alive(p, s)}
        left |= session_processes(since, child.pid)  # an orphan that had the session's files
        return child.returncode, err, seen, left
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
        _kill(p for p, s in (seen | session_processes(since, child.pid)).items() if _alive(p, s))


@linux
@pytest.mark.slow
def test_second_ctrl_c_inside_ray_init_stops_every_process_of_the_session(tmp_path):
    # ray.init held until the agents run and the Ctrl-Cs are sent: always inside it.
    status, err, seen, left = _interrupted_start(tmp_path, interrupts=2, agents=True)
    assert len(seen) >= 4, seen  # the GCS, the raylet and its two agents at least
    assert left == {}, left
    assert status == 130, err
    assert err.strip() == LINE, err
    assert not (tmp_path / "run").exists()  # refused before the run folder


@linux
@pytest.mark.slow
def test_one_ctrl_c_is_held_until_ray_init_returns_then_stops_the_instance(tmp_path):
    # Sent as soon as the node's processes are up, inside the hold: ray.init returns
    # only after it.
    status, err, seen, left = _interrupted_start(tmp_path, interrupts=1, agents=False)
    assert len(seen) >= 2, seen  # the GCS and the raylet at least
    assert left == {}, left
    assert status == 130, err
    assert err.strip() == LINE, err
    assert not (tmp_path / "run").exists()


# The CLI in a subprocess, Ray's Node.kill_all_processes (what ray.shutdown stops the
# node's processes with, at exit) made to say so and wait until the file `argv[1]`
# exists: the Ctrl-Cs the test sends before making it land inside the shutdown,
# deterministically (a bound of 600 s ends a broken test).
CHILD_AT_EXIT = textwrap.dedent("""
    import os, signal, sys, time
    from ray._private import node

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    kill, release = node.Node.kill_all_processes, sys.argv.pop(1)

    def kill_all_processes(self, *args, **kwargs):
        print("ray: stopping the node", flush=True)
        deadline = time.monotonic() + 600
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.05)
        return kill(self, *args, **kwargs)

    node.Node.kill_all_processes = kill_all_processes
    from qzoo.cli.main import entry

    entry()
""")


@linux
@pytest.mark.slow
@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_second_ctrl_c_while_ray_shuts_down_at_exit_leaves_no_process(first, tmp_path):
    pytest.importorskip("ray")
    env = _child_env()
    run_dir = tmp_path / "run"
    argv = ["train", "dqn", "--env", "CartPole-v1", "--ray", "--iterations", "3",
            "--train-frames", "1000000", "--no-progress", "--no-tensorboard",
            "--run-dir", str(run_dir)]  # fmt: skip
    since = clock_ticks()
    release = tmp_path / "release"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_AT_EXIT, str(release), *argv], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    seen, lines = {}, []
    try:
        for line in child.stdout:  # iteration 0 saved: the run is under way
            lines.append(line)
            if line.startswith("iteration=0 "):
                break
        deadline = time.monotonic() + 600  # a bound on a broken test: minutes under load
        while len(_agents(child.pid, since)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = session_processes(since, child.pid)
        assert len(_agents(child.pid, since)) >= 2, "Ray's agents did not start"
        child.send_signal(first)
        for line in child.stdout:
            lines.append(line)
            if line.strip() == "ray: stopping the node":
                break
        for _ in range(2):  # Ctrl-C, twice, within the held shutdown
            child.send_signal(signal.SIGINT)
            time.sleep(0.2)
        release.touch()
        lines += child.communicate(timeout=600)[0].splitlines(keepends=True)
        left = {p: s for p, s in seen.items() if _alive(p, s)}
        left |= session_processes(since, child.pid)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
        _kill(p for p, s in (seen | session_processes(since, child.pid)).items() if _alive(p, s))
    out = "".join(lines)
    assert len(seen) >= 4, seen  # the GCS, the raylet and its two agents at least
    assert left == {}, (left, out)
    assert child.returncode == 130, out
    assert f"qzoo: interrupted; resume with: qzoo resume {run_dir}\n" in out, out
    assert "ray: stopping the node" in out and "Traceback" not in out, out
