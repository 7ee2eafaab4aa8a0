"""The run folder under faults: kills during a save, damaged results.csv, concurrent
runs, planted pickles, full disks, bad resumes and divergence. Each refusal is one
line, exit code 2, and leaves the folder exactly as it was."""

import dataclasses
import errno
import fcntl
import json
import math
import os
import pickle
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import torch
from helpers import replacing

from qzoo.cli import resume
from qzoo.cli.main import main
from qzoo.errors import Diverged
from qzoo.run import checkpoint, checks
from qzoo.run import trainer as loop

ARGS = ["--env", "CartPole-v1", "--iterations", "1", "--train-frames", "300", "--eval-frames",
        "100", "--replay-capacity", "1000", "--min-replay-capacity-fraction", "0.1",
        "--no-tensorboard", "--no-progress"]  # fmt: skip
MORE = ["--iterations", "2", "--accept-changes", "iterations"]  # one more iteration


def train(run_dir, *extra, agent="dqn"):
    return main(["train", agent, "--run-dir", str(run_dir), *replacing(ARGS, extra)])


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """A finished run (iterations 0 and 1); tests work on copies of it."""
    run_dir = tmp_path_factory.mktemp("base") / "run"
    assert train(run_dir) == 0
    return run_dir


@pytest.fixture
def run_dir(base_run, tmp_path):
    shutil.copytree(base_run, tmp_path / "run")
    assert train(tmp_path / "run") == 0  # a finished run: rewrites config.json's run_dir
    return tmp_path / "run"


def snapshot(folder):
    """Every file under `folder` with its bytes (and every folder), to compare."""
    files = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs:
            files[os.path.relpath(os.path.join(root, name), folder)] = None
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, folder)] = f.read()
    return files


def one_error_line(err, alone=True):
    """The error line; `alone`: nothing else was printed (no progress lines before it)."""
    *before, line = err.splitlines()
    assert line.startswith("qzoo: error: ") and err.endswith("\n"), err
    assert not (alone and before) and "Traceback" not in err
    assert not any("qzoo:" in b for b in before)
    return line


# ---- refusals: parametrized bad resumes, each changing nothing ---------------------


def edit_json(name, **changes):
    def prepare(run_dir):
        path = run_dir / name
        data = json.loads(path.read_text())
        data.update(changes)
        path.write_text(json.dumps(data))
        return run_dir

    return prepare


def write(name, data):
    def prepare(run_dir):
        (run_dir / name).parent.mkdir(exist_ok=True)
        (run_dir / name).write_bytes(data)
        return run_dir

    return prepare


def edit_checkpoint(edit):
    def prepare(run_dir):
        path = run_dir / "checkpoints" / "latest.safetensors"
        state = checkpoint.load(path)
        edit(state, run_dir)
        checkpoint.save(path, state)
        return run_dir

    return prepare


def other_agent(state, run_dir):
    state["config"]["agent"] = "c51"
    os.unlink(run_dir / "config.json")


def other_network(state, run_dir):
    online = state["trainer"]["learner"]["online"]
    name = next(k for k, v in online.items() if v.ndim == 2)
    online[name] = torch.zeros(online[name].shape[0] + 1, online[name].shape[1])


def planted_pickle(name):
    def prepare(run_dir):
        with open(run_dir / "checkpoints" / name, "wb") as f:
            pickle.dump(CreatesAFile(run_dir.parent / "pwned"), f, protocol=4)
        return run_dir

    return prepare


class CreatesAFile:
    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def foreign_safetensors(run_dir):
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"w": np.ones(2, np.float32)}, str(run_dir / "checkpoints" / "latest.safetensors"))
    return run_dir


def truncate_checkpoint(run_dir):
    path = run_dir / "checkpoints" / "latest.safetensors"
    path.write_bytes(path.read_bytes()[:1000])
    return run_dir


def other_format_version(run_dir):
    path = run_dir / "checkpoints" / "latest.safetensors"
    path.write_bytes(path.read_bytes().replace(b'"format_version":"1"', b'"format_version":"9"'))
    return run_dir


def no_checkpoint(run_dir):
    shutil.rmtree(run_dir / "checkpoints")
    return run_dir


def foreign_folder(run_dir):
    shutil.rmtree(run_dir)
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("my thesis\n")
    return run_dir


def a_file(run_dir):
    shutil.rmtree(run_dir)
    run_dir.write_text("a file\n")
    return run_dir


def under_a_file(run_dir):
    return a_file(run_dir) / "sub"


def same(run_dir):
    return run_dir


def model_folder(run_dir):
    """A model folder `qzoo export` wrote (config.json, results.csv and no checkpoint)."""
    assert main(["export", str(run_dir), str(run_dir.parent / "model")]) == 0
    return run_dir.parent / "model"


def busy(run_dir):
    """The folder's lock held, as by a run in another process (flock: per open file)."""
    fd = os.open(run_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"pid 1 on host elsewhere\n")
    return run_dir


BAD_RESUMES = {
    "edited seed": (edit_json("config.json", seed=2), [], "config.json was edited (seed: 2 "),
    "edited lr": (edit_json("config.json", learning_rate=1.0), [], "learning_rate: 1.0 instead"),
    "config not json": (write("config.json", b"{nope"), [], "is not a qzoo config"),
    "config a list": (write("config.json", b"[1, 2]"), [], "is not a qzoo config"),
    "config foreign keys": (
        write("config.json", b'{"agent": "x", "env": "y", "name": "z"}'),
        [],
        "unknown keys: name",
    ),
    "results other columns": (write("results.csv", b"a,b\n1,2\n"), [], "was not written by qzoo"),
    "results without checkpoint": (no_checkpoint, [], "no checkpoint to rebuild it from"),
    "other seed": (same, ["--seed", "2"], "--seed 2 differs from 1 used by the run in"),
    "other replay size": (same, ["--replay-capacity", "2000"], "2000 differs from 1000 (replay"),
    "other network": (same, ["--mlp-hidden", "32"], "32 differs from 64 (network shape)"),
    "other mlp layers": (same, ["--mlp-layers", "120,84"], "'120,84' differs from '' (network"),
    "more iterations": (same, ["--iterations", "5"], "--accept-changes iterations to change"),
    "accept a seed": (same, ["--seed", "2", "--accept-changes", "seed"], "'seed' cannot be"),
    "old latest.pt": (planted_pickle("latest.pt"), [], "old pickle-based checkpoint"),
    "pickle as safetensors": (planted_pickle("latest.safetensors"), [], "is a pickle file"),
    "foreign safetensors": (foreign_safetensors, [], "no qzoo metadata"),
    "truncated checkpoint": (truncate_checkpoint, [], "is corrupt"),
    "format version": (other_format_version, [], "qzoo format version '9'"),
    "checkpoint of c51": (edit_checkpoint(other_agent), [], "belongs to a c51 run on CartPole"),
    "network shape": (edit_checkpoint(other_network), MORE, "(network shape differs)"),
    "foreign folder": (foreign_folder, [], "holds files qzoo did not write (notes.txt)"),
    "run folder is a file": (a_file, [], "is a file, not a folder"),
    "under a file": (under_a_file, [], "run/sub: Not a directory"),
    # Issue 34 #8: was taken for a half-made run ("delete its config.json", "move
    # results.csv away"), advice that mixes a run into the model folder.
    "model folder": (model_folder, [], "model is a model folder (`qzoo export` wrote it), not"),
    "busy": (busy, [], "is in use by pid 1 on host elsewhere; wait for it to end or stop it"),
}


@pytest.mark.parametrize("case", BAD_RESUMES)
def test_bad_resume_is_refused_and_changes_nothing(case, run_dir, capsys):
    prepare, extra, message = BAD_RESUMES[case]
    target = prepare(run_dir)
    before = snapshot(run_dir.parent)
    capsys.readouterr()
    assert train(target, *extra) == 2
    err = one_error_line(capsys.readouterr().err)
    assert message in err
    assert snapshot(run_dir.parent) == before
    assert not (run_dir.parent / "pwned").exists()  # no pickle ever ran


# Options `qzoo resume` takes: its messages name no other (issue 34 #5, #6: they advised
# "another --run-dir", and named options of a config.json edit as if typed).
RESUME_TAKES = {"--" + n.replace("_", "-") for n in resume.OPTIONS}


# Those whose refusal comes from the command (dqn), not the folder: `qzoo resume`
# resumes the c51 run the checkpoint holds.
FROM_THE_COMMAND = ("checkpoint of c51",)


@pytest.mark.parametrize("case", [c for c, (_, extra, _) in BAD_RESUMES.items()
                                  if not extra and c not in FROM_THE_COMMAND])  # fmt: skip
def test_bad_resume_by_qzoo_resume_names_only_its_own_options(case, run_dir, capsys):
    prepare, _, _ = BAD_RESUMES[case]
    target = prepare(run_dir)
    before = snapshot(run_dir.parent)
    capsys.readouterr()
    assert main(["resume", str(target)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert set(re.findall(r"--[a-z][a-z-]*", line)) <= RESUME_TAKES, line
    assert snapshot(run_dir.parent) == before
    assert not (run_dir.parent / "pwned").exists()


def test_fewer_iterations_than_trained_are_refused_and_change_nothing(run_dir, capsys):
    """Issue 34 #4: `qzoo resume RUN --iterations 1` on a run of 2 said "RUN is complete
    (1 iterations)" and rewrote config.json, after which the run's own command was
    refused."""
    assert train(run_dir, *MORE) == 0  # iterations 0, 1 and 2
    before = snapshot(run_dir.parent)
    capsys.readouterr()
    expected = (f"qzoo: error: --iterations: bad value 1; expected at least the 2 iterations "
                f"the run in {run_dir} has trained")  # fmt: skip
    assert main(["resume", str(run_dir), "--iterations", "1"]) == 2
    assert one_error_line(capsys.readouterr().err) == expected
    assert train(run_dir, "--iterations", "1", "--accept-changes", "iterations") == 2
    assert one_error_line(capsys.readouterr().err) == expected
    assert snapshot(run_dir.parent) == before
    assert train(run_dir, *MORE) == 0  # the run's own command: complete, as it was
    assert f"{run_dir} is complete (2 iterations)" in capsys.readouterr().err
    assert main(["resume", str(run_dir), "--iterations", "2"]) == 0


def test_a_deleted_config_json_is_rewritten_from_the_checkpoint(run_dir):
    config = (run_dir / "config.json").read_bytes()
    os.unlink(run_dir / "config.json")
    assert train(run_dir) == 0
    assert (run_dir / "config.json").read_bytes() == config


# ---- results.csv is derived from the checkpoint's rows -----------------------------


def _garble_rows(data):
    """Garbage 50 bytes into the first row (not the header, which grows with columns)."""
    h = data.index(b"\n") + 1
    return data[: h + 50] + b"\xff\xfe garbage,,,\n" * 3 + data[h + 70 :]


DAMAGE = {
    "deleted": lambda data: None,
    "empty": lambda data: b"",
    "cut in the header": lambda data: data[:20],
    "cut in a row": lambda data: data[:-30],
    "last row dropped": lambda data: data[: data.rindex(b"\n", 0, -1) + 1],
    "garbled rows": lambda data: _garble_rows(data),
    "NUL bytes appended": lambda data: data + b"\0" * 4096,
    "NUL bytes inside": lambda data: data[:400] + b"\0" * 100 + data[500:],
    "all NUL bytes": lambda data: b"\0" * len(data),
    "row repeated": lambda data: data + data[data.index(b"\n") + 1 :],
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_results_csv_is_rebuilt_exactly(damage, run_dir):
    path = run_dir / "results.csv"
    good = path.read_bytes()
    damaged = DAMAGE[damage](good)
    if damaged is None:
        path.unlink()
    else:
        path.write_bytes(damaged)
    assert train(run_dir) == 0  # a finished run: only results.csv is rebuilt
    assert path.read_bytes() == good


def test_cut_results_csv_then_more_iterations_has_each_row_once(run_dir, capsys):
    path = run_dir / "results.csv"
    path.write_bytes(path.read_bytes()[:50])
    assert train(run_dir, *MORE) == 0
    assert "accepting --iterations 2 (was 1): epsilon's decay" in capsys.readouterr().err
    lines = path.read_text().splitlines()
    assert [line.split(",")[0] for line in lines] == ["iteration", "0", "1", "2"]
    assert json.loads((run_dir / "config.json").read_text())["iterations"] == 2
    assert train(run_dir, "--iterations", "2") == 0  # the run is now a 2-iteration run


def test_results_csv_takes_a_column_that_later_rows_add(tmp_path):
    from qzoo.run.logs import CsvLog

    log = CsvLog(tmp_path / "results.csv")
    rows = [{"iteration": 0, "loss": math.nan}, {"iteration": 1, "loss": 0.5, "new": 2}]
    log.write(rows)
    assert (tmp_path / "results.csv").read_bytes() == b"iteration,loss,new\r\n0,nan,\r\n1,0.5,2\r\n"
    log.check(rows)  # what it wrote is qzoo's


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
    run_iteration = loop.Trainer.run_iteration

    def interrupted(self, progress=None):
        if self.iteration == 2:
            raise KeyboardInterrupt
        return run_iteration(self, progress)

    monkeypatch.setattr(loop.Trainer, "run_iteration", interrupted)
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


def test_an_option_newer_than_the_run_is_compared_with_what_the_run_ran_with(tmp_path):
    """A run saved by a qzoo without --mlp-layers ran with its default (none): resuming
    it with --mlp-layers is refused as a change, resuming it as it was is not."""
    import qzoo.configuration as config_lib
    from qzoo.run.changes import differences

    current = dataclasses.asdict(config_lib.build_config("dqn", {"env": "CartPole-v1"}))
    old = {k: v for k, v in current.items() if k not in ("mlp_layers", "pin_threads")}
    assert differences(old, current, ()) == []
    changed = {**current, "mlp_layers": "120,84"}
    assert differences(old, changed, ()) == [("mlp_layers", "", "120,84")]
    # The default is the agent's and environment's: R2D1's CartPole sequences.
    r2d1 = dataclasses.asdict(config_lib.build_config("r2d1", {"env": "CartPole-v1"}))
    assert differences({k: v for k, v in r2d1.items() if k != "burn_in_steps"}, r2d1, ()) == []


def test_resuming_an_older_runs_folder_with_a_newer_option_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    assert train(run) == 0
    saved = json.loads((run / "config.json").read_text())
    saved.pop("mlp_layers")
    (run / "config.json").write_text(json.dumps(saved))
    shutil.rmtree(run / "checkpoints")  # config.json alone: the check a start makes
    capsys.readouterr()
    assert train(run, "--mlp-layers", "32,32") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--mlp-layers '32,32' differs from ''" in err
