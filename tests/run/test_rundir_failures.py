"""What stops a run and what it leaves (a run folder's second half; test_rundir.py has
the refusals and results.csv): kills, locks and temporary files; OS errors, one line
naming the path with the previous checkpoint intact; divergence."""

import errno
import fcntl
import math
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
from helpers import ctrl_c_at_iteration, replacing
from rundir_common import ARGS, MORE, one_error_line, snapshot, train

from qzoo.cli.main import main
from qzoo.errors import Diverged
from qzoo.run import checkpoint, checks
from qzoo.run import trainer as loop

# ---- kills, locks, temporary files --------------------------------------------------

SLOW_SAVE = """
import os, sys, time
import numpy as np
from qzoo.run import checkpoint
checkpoint.CHUNK_BYTES = 2**20
write, written = os.write, [0]

def stalls_midway(fd, data):  # after 8 of the 64 MiB, waits to be killed
    written[0] += len(data)
    if written[0] > 8 * 2**20:
        time.sleep(3600)
    return write(fd, data)

os.write = stalls_midway
checkpoint.save(sys.argv[1], {"frames": np.ones(64 * 2**20, np.uint8)})
"""


def test_kill_during_a_save_keeps_the_checkpoint_and_the_next_start_cleans_up(run_dir):
    folder = run_dir / "checkpoints"
    before = snapshot(run_dir)
    process = subprocess.Popen([sys.executable, "-c", SLOW_SAVE, folder / "latest.safetensors"])
    deadline = time.time() + 600  # a bound on a broken test: start-up takes minutes under load
    while time.time() < deadline and process.poll() is None:
        tmp = [n for n in os.listdir(folder) if n.startswith(".tmp-")]
        if tmp and os.path.getsize(folder / tmp[0]) > 4 * 2**20:
            break
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert tmp and (folder / tmp[0]).exists(), "the save was not caught midway"
    after = snapshot(run_dir)
    assert after.pop(os.path.join("checkpoints", tmp[0])) and after == before
    (run_dir / ".tmp-abc-config.json").write_text("{")  # as a kill in atomic_write leaves
    assert train(run_dir) == 0
    assert snapshot(run_dir) == before


def test_second_run_is_refused_naming_the_holder_and_a_killed_runs_lock_blocks_nothing(
    run_dir, capsys, monkeypatch
):
    command = [sys.executable, "-m", "qzoo", "train", "dqn", "--run-dir", str(run_dir),
               *replacing(ARGS, ["--iterations", "1000", "--accept-changes", "iterations"])]  # fmt: skip
    holder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 600  # a bound on a broken test (start-up, under load)
        lock = run_dir / ".lock"
        while time.time() < deadline and not (lock.exists() and lock.read_text()):
            assert holder.poll() is None
            time.sleep(0.05)
        capsys.readouterr()
        # Refused at once, never waiting for the lock: every flock() asks not to block
        # (one that would has failed here instead of hanging), and the holder, which
        # runs for hours, is still running when the refusal comes. (Was a bound of 10 s
        # on the refusal's wall-clock time: not certain on a loaded machine.)
        flock = fcntl.flock

        def never_waiting(fd, operation):
            assert operation & fcntl.LOCK_NB, "a flock() that waits for the holder"
            return flock(fd, operation)

        monkeypatch.setattr(fcntl, "flock", never_waiting)
        assert train(run_dir, "--iterations", "1000", "--accept-changes", "iterations") == 2
        monkeypatch.setattr(fcntl, "flock", flock)
        assert holder.poll() is None
        err = one_error_line(capsys.readouterr().err)
        assert f"is in use by pid {holder.pid} on host {socket.gethostname()}" in err
    finally:
        holder.kill()
        holder.wait()
    assert lock.exists()  # left by the killed run: stale
    assert train(run_dir, "--iterations", "1", "--accept-changes", "iterations") == 0
    assert not lock.exists()


def test_ctrl_c_prints_the_command_that_resumes(run_dir, monkeypatch, capsys):
    run_iteration = ctrl_c_at_iteration(monkeypatch, 2)
    assert train(run_dir, "--iterations", "3", "--accept-changes", "iterations") == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.splitlines()[-1]
    assert line == f"qzoo: interrupted; resume with: qzoo resume {run_dir}"
    monkeypatch.setattr(loop.Trainer, "run_iteration", run_iteration)
    assert main(shlex.split(line.split("resume with: ")[1])[1:]) == 0
    rows = (run_dir / "results.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows] == ["iteration", "0", "1", "2", "3"]


def test_ctrl_c_before_a_new_runs_first_checkpoint_leaves_no_folder(tmp_path, monkeypatch,
                                                                   capsys):  # fmt: skip
    """Nothing to resume: no resume line, and the folder this command made is gone."""

    def interrupted(self, progress=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(loop.Trainer, "run_iteration", interrupted)
    assert train(tmp_path / "run") == 130
    err = capsys.readouterr().err
    assert (
        err.splitlines()[-1] == "qzoo: interrupted before the first checkpoint; nothing was saved"
    )
    assert not (tmp_path / "run").exists()
    # A folder the user made stays, empty or not.
    (tmp_path / "mine").mkdir()
    assert train(tmp_path / "mine") == 130 and (tmp_path / "mine").is_dir()


def test_a_failure_before_the_first_checkpoint_leaves_a_users_folder_as_it_was(
    tmp_path, monkeypatch, capsys
):
    """A new run that stops with an error before its first checkpoint (here the disk, in
    iteration 0) saved nothing: its config.json and threads.json go, as on Ctrl-C."""

    def failing(self, progress=None):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(loop.Trainer, "run_iteration", failing)
    (tmp_path / "run").mkdir()
    assert train(tmp_path / "run") == 2
    line = one_error_line(capsys.readouterr().err, alone=False)
    assert line.endswith(": Input/output error; no checkpoint had been saved yet")
    assert os.listdir(tmp_path / "run") == []


def test_a_lock_file_that_cannot_be_written_leaves_no_folder(tmp_path, monkeypatch, capsys):
    """A disk full to the last block: the lock file is made, its line cannot be written;
    it went unremoved, and so did the new folder holding it (issue 34's fault pass)."""
    write = os.write

    def full(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".lock"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write(fd, data)

    monkeypatch.setattr(os, "write", full)
    assert train(tmp_path / "run") == 2
    line = one_error_line(capsys.readouterr().err)
    lock = tmp_path / "run" / ".lock"
    assert line == f"qzoo: error: cannot create lock file {lock}: No space left on device"
    assert os.listdir(tmp_path) == []


def test_ctrl_c_right_after_a_save_still_leaves_its_rows_in_results_csv(run_dir, monkeypatch):
    save = checkpoint.save

    def save_then_interrupt(path, state):
        save(path, state)
        raise KeyboardInterrupt  # e.g. during the folder's fsync, after the rename

    monkeypatch.setattr(checkpoint, "save", save_then_interrupt)
    assert train(run_dir, *MORE) == 130
    rows = (run_dir / "results.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows] == ["iteration", "0", "1", "2"]


# ---- OS errors: one line naming the path, the previous checkpoint intact ------------


def test_disk_full_during_a_save_keeps_the_previous_checkpoint(run_dir, monkeypatch, capsys):
    before = snapshot(run_dir)
    write = os.write

    def full(fd, data):
        if ".tmp-" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write(fd, data)

    monkeypatch.setattr(os, "write", full)
    capsys.readouterr()
    assert train(run_dir, *MORE) == 2
    err = one_error_line(capsys.readouterr().err, alone=False)
    assert f"cannot save checkpoint {run_dir / 'checkpoints' / 'latest.safetensors'}" in err
    assert "No space left on device; the previous checkpoint (iteration 1) is intact" in err
    after = snapshot(run_dir)
    assert after.pop("config.json") != before.pop("config.json")  # the accepted iterations
    assert after == before  # no temporary file left, checkpoint and results unchanged


@pytest.fixture
def small_tmpfs():
    folder = tempfile.mkdtemp()
    command = ["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", folder]
    mounted = subprocess.run(command, check=False, capture_output=True).returncode == 0
    if not mounted:
        os.rmdir(folder)
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield folder
    subprocess.run(["umount", folder], check=True)
    os.rmdir(folder)


def test_a_real_full_disk(run_dir, small_tmpfs, capsys, monkeypatch):
    target = os.path.join(small_tmpfs, "run")
    shutil.copytree(run_dir, target)
    with open(os.path.join(small_tmpfs, "filler"), "wb") as f:  # leaves less than a checkpoint
        free = os.statvfs(small_tmpfs).f_bavail * os.statvfs(small_tmpfs).f_frsize
        f.write(b"x" * (free - 50_000))
    before = snapshot(target)
    capsys.readouterr()
    # Refused before it trains: the disk cannot hold its checkpoint (checks.py).
    assert train(target, *MORE) == 2
    err = one_error_line(capsys.readouterr().err)
    assert f"cannot save checkpoints in {target}: one needs about " in err
    assert snapshot(target) == before
    # Past that check (a disk filled while the run trains), the save fails and says so.
    monkeypatch.setattr(checks, "check_checkpoint_space", lambda *args: None)
    assert train(target, *MORE) == 2
    err = one_error_line(capsys.readouterr().err, alone=False)
    assert "No space left on device" in err and "(iteration 1) is intact" in err
    after = snapshot(target)
    assert after.pop("config.json") != before.pop("config.json")
    assert after == before


def test_a_folder_that_cannot_be_written(run_dir, monkeypatch, capsys):
    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), kwargs.get("dir"))

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    before = snapshot(run_dir)
    capsys.readouterr()
    assert train(run_dir) == 2
    err = one_error_line(capsys.readouterr().err)
    assert f"cannot write {run_dir / 'config.json'}: {run_dir}: Permission denied" in err
    assert snapshot(run_dir) == before


def test_a_read_only_file_system(run_dir, small_tmpfs, capsys):
    """The read-only case that holds for root too (root writes into a folder of mode
    0555, so the test below skips as root): the run's disk remounted read-only."""
    target = os.path.join(small_tmpfs, "run")
    shutil.copytree(run_dir, target)
    assert train(target) == 0  # its config.json now names this folder
    subprocess.run(["mount", "-o", "remount,ro", small_tmpfs], check=True)
    try:
        before = snapshot(target)
        capsys.readouterr()
        assert train(target, *MORE) == 2
        assert "Read-only file system" in one_error_line(capsys.readouterr().err)
        assert snapshot(target) == before
    finally:
        subprocess.run(["mount", "-o", "remount,rw", small_tmpfs], check=True)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder(run_dir, capsys):
    os.chmod(run_dir, 0o555)
    try:
        assert train(run_dir) == 2
        assert "Permission denied" in one_error_line(capsys.readouterr().err)
    finally:
        os.chmod(run_dir, 0o755)


# ---- divergence -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [{"train_loss": math.nan}, {"train_mean_q": math.inf}, "raised by the loop"],
)
def test_divergence_stops_with_exit_3_and_keeps_the_last_good_checkpoint(
    failure, run_dir, monkeypatch, capsys
):
    run_iteration = loop.Trainer.run_iteration

    def diverging(self, progress=None):
        if failure == "raised by the loop":
            raise Diverged("iteration 2: train_loss is nan")
        row = run_iteration(self, progress)
        return {**row, **failure}

    before = snapshot(run_dir)
    monkeypatch.setattr(loop.Trainer, "run_iteration", diverging)
    capsys.readouterr()
    assert train(run_dir, *MORE) == 3
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("qzoo: diverged: iteration 2: ") and "Traceback" not in err
    assert "the last good checkpoint (iteration 1) is intact" in err
    after = snapshot(run_dir)
    after.pop("config.json"), before.pop("config.json")
    assert after == before  # checkpoint and results.csv byte-identical
