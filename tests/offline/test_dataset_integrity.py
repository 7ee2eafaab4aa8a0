"""A memory-mappable dataset copy under faults: each array's checksum is written as the
conversion streams it out and checked when it is opened (a flipped byte is one line,
exit 2, never trained on; a copy from before checksums loads unverified), and a full
disk is one line with the space needed and free, exit 2, nothing left behind, where it
used to kill the process with SIGBUS."""

import errno
import json
import os
import shutil
import subprocess
import sys
import zlib
from collections import namedtuple

import numpy as np
import pytest
from helpers import REPO, episodes

from qzoo.cli.main import main
from qzoo.errors import UserError
from qzoo.offline import layout as dataset_lib
from qzoo.offline.writer import LoggedReplayWriter

FRAME = (4, 10, 10)  # minatar/breakout's frames
TRAIN = ["train", "dqn", "--env", "minatar/breakout", "--iterations", "1", "--train-frames",
         "100", "--eval-frames", "50", "--no-tensorboard", "--no-progress"]  # fmt: skip


@pytest.fixture
def source(tmp_path):
    """A DQN Replay Dataset of MinAtar-shaped frames: two full files of 200 rows and a
    partial one (stack 1, as a MinAtar run logs)."""
    writer = LoggedReplayWriter(tmp_path / "src" / "replay_logs", 200, FRAME, stack=1)
    episodes(writer, [30] * 16)
    writer.close()
    return tmp_path / "src"


@pytest.fixture
def converted(source, tmp_path):
    assert main(["dataset", "convert", str(source), str(tmp_path / "q"), "--to", "qzoo"]) == 0
    dataset_lib._VERIFIED.clear()  # a new process, as far as checks go
    return tmp_path / "q"


def one_error_line(err, *fragments):
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("qzoo: error: "), err
    for fragment in fragments:
        assert fragment in err, err


def flip(path, at):
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_the_manifest_holds_each_arrays_crc32(converted):
    manifest = json.loads((converted / "dataset.json").read_text())
    assert sorted(manifest["crc32"]) == ["0", "1", "2"]
    for suffix, crcs in manifest["crc32"].items():
        for attribute, crc in crcs.items():
            array = np.load(converted / f"ckpt.{suffix}" / f"{attribute}.npy")
            assert crc == f"{zlib.crc32(array.tobytes()):08x}", (suffix, attribute)


@pytest.mark.parametrize("attribute", ["observation", "reward"])
def test_a_flipped_byte_is_refused_by_every_reader(converted, tmp_path, capsys, attribute):
    path = converted / "ckpt.1" / f"{attribute}.npy"
    flip(path, os.path.getsize(path) - 7)  # inside the data, past the NPY header
    run_dir = tmp_path / "run"
    capsys.readouterr()
    assert main([*TRAIN, "--offline", str(converted), "--run-dir", str(run_dir)]) == 2
    problem = f"{path} is damaged: array {attribute!r} does not match its checksum"
    one_error_line(capsys.readouterr().err, problem, "convert the dataset again")
    assert not run_dir.exists()
    back = tmp_path / "back"
    assert main(["dataset", "convert", str(converted), str(back), "--to", "dopamine"]) == 2
    one_error_line(capsys.readouterr().err, problem)
    assert not back.exists()


def test_a_copy_without_checksums_loads_unverified_and_says_so(converted, tmp_path, capsys):
    manifest = json.loads((converted / "dataset.json").read_text())
    del manifest["crc32"]
    (converted / "dataset.json").write_text(json.dumps(manifest))
    flip(converted / "ckpt.0" / "observation.npy", 200)  # nothing can tell
    capsys.readouterr()
    assert main([*TRAIN, "--offline", str(converted), "--run-dir", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert err.count(f"qzoo: note: {converted} has no checksums") == 1
    assert "arrays are loaded unverified" in err


def test_each_file_is_read_through_once_per_process(converted, monkeypatch):
    read = []
    of_array = dataset_lib.checksums.of_array
    monkeypatch.setattr(dataset_lib.checksums, "of_array", lambda a: read.append(a) or of_array(a))
    dataset_lib.load_qzoo(str(converted))
    dataset_lib.load_qzoo(str(converted))
    assert len(read) == 3 * 6
    dataset_lib.load_qzoo(str(converted), verify=())  # listing the suffixes reads nothing
    assert len(read) == 3 * 6


# ---- a full disk -----------------------------------------------------------------


def test_a_conversion_that_cannot_fit_is_refused_before_writing(source, tmp_path, monkeypatch,
                                                                capsys):  # fmt: skip
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(2**30, 2**30, 50_000))
    dst = tmp_path / "q"
    assert main(["dataset", "convert", str(source), str(dst), "--to", "qzoo"]) == 2
    # 3 files x 200 rows of 400-byte frames, and 200 x (4 + 4 + 1) bytes of the rest,
    # the 1 + 4 int64 add_count and invalid_range, each file with its 128-byte header.
    need = 3 * (200 * 400 + 200 * 9 + 8 + 16 + 6 * 128)
    one_error_line(capsys.readouterr().err, f"convert: {dst} has 48.8 KiB free",
                   f"needs {need / 1024:,.1f} KiB")  # fmt: skip
    assert not dst.exists()


def test_a_disk_full_while_reserving_leaves_nothing(source, tmp_path, monkeypatch, capsys):
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    dst = tmp_path / "q"
    assert main(["dataset", "convert", str(source), str(dst), "--to", "qzoo"]) == 2
    err = capsys.readouterr().err
    one_error_line(err, f"cannot write {dst / 'ckpt.0' / 'observation.npy.tmp'}: not enough "
                   "disk space (78.2 KiB needed, ")  # fmt: skip
    assert not dst.exists()


def test_a_replay_log_that_cannot_be_staged_leaves_nothing(tmp_path, monkeypatch, capsys):
    reserved = []

    def full(fd, offset, length):
        reserved.append(length)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    log, run_dir = tmp_path / "log", tmp_path / "run"
    argv = [*TRAIN, "--replay-capacity", "1000", "--min-replay-capacity-fraction", "0.05",
            "--log-replay-capacity", "1000", "--log-replay", str(log), "--run-dir", str(run_dir)]  # fmt: skip
    assert main(argv) == 2
    staged = log / ".staging" / "observation.npy"
    one_error_line(capsys.readouterr().err, f"cannot write {staged}: not enough disk space")
    assert reserved == [128 + 1000 * 400]  # the frames' file, header and rows
    assert not log.exists() and not run_dir.exists()


def test_staging_files_reopened_by_a_resume_are_reserved_and_kept(tmp_path, monkeypatch):
    """A resume reopens the staging files (an older qzoo's were sparse): their holes are
    reserved too, and a full disk then leaves them as they were."""
    args = (tmp_path / "log" / "replay_logs", 100, FRAME)
    staging = tmp_path / "log" / ".staging"
    writer = LoggedReplayWriter(*args, staging=staging)
    episodes(writer, [10, 12])
    del writer
    before = {p.name: p.read_bytes() for p in staging.iterdir()}
    reserved = []

    def full(fd, offset, length):
        reserved.append(length)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(UserError, match=f"cannot write {staging / 'observation.npy'}: not enough"):
        LoggedReplayWriter(*args, staging=staging)
    assert reserved == [128 + 100 * 400]
    assert {p.name: p.read_bytes() for p in staging.iterdir()} == before


def small_disk(tmp_path):
    """A 1 MiB tmpfs mounted at tmp_path/small, or a skip where mounting is not allowed."""
    folder = tmp_path / "small"
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                          capture_output=True, check=False)  # fmt: skip
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    return folder


def qzoo(*argv):
    return subprocess.run([sys.executable, "-m", "qzoo", *argv], cwd=REPO, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip


def test_on_a_real_full_disk_no_sigbus(tmp_path):
    """For real, in a new process (SIGBUS would kill it with 135): a conversion onto a
    1 MiB file system, and a run logging its replay there."""
    small = small_disk(tmp_path)
    try:
        writer = LoggedReplayWriter(tmp_path / "src" / "replay_logs", 3000, FRAME, stack=1)
        episodes(writer, [30] * 101)  # a full file of 1.2 MB of frames, and the rest
        writer.close()
        source = tmp_path / "src"
        done = qzoo("dataset", "convert", str(source), str(small / "q"), "--to", "qzoo")
        assert done.returncode == 2, done.stderr
        assert "needs" in done.stderr and "free" in done.stderr
        log = small / "log"
        done = qzoo(*TRAIN[:6], "--replay-capacity", "1000", "--min-replay-capacity-fraction",
                    "0.05", *TRAIN[6:], "--log-replay", str(log), "--run-dir", str(tmp_path / "r"))  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "not enough disk space" in done.stderr
        assert os.listdir(small) == []
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_a_conversion_onto_a_full_or_read_only_disk_is_one_line(tmp_path):
    """Dopamine's files written back onto a full disk, or either layout onto a read-only
    one, were an OSError traceback (exit 1; issue 34's fault pass): one line, exit 2,
    and no folder left."""
    small = small_disk(tmp_path)
    try:
        writer = LoggedReplayWriter(tmp_path / "src" / "replay_logs", 3000, FRAME, stack=1)
        episodes(writer, [30] * 101)
        writer.close()
        copy = tmp_path / "q"
        assert qzoo("dataset", "convert", str(tmp_path / "src"), str(copy), "--to",
                    "qzoo").returncode == 0  # fmt: skip
        (small / "filler").write_bytes(b"\0" * (1024 - 32) * 1024)  # 32 KiB left
        done = qzoo("dataset", "convert", str(copy), str(small / "back"), "--to", "dopamine")
        assert done.returncode == 2 and done.stderr.splitlines()[-1] == (
            f"qzoo: error: cannot write {small / 'back'}: No space left on device"
        ), done.stderr
        assert "Traceback" not in done.stderr and os.listdir(small) == ["filler"]
        subprocess.run(["mount", "-o", "remount,ro", str(small)], check=True)
        for source, to in ((tmp_path / "src", "qzoo"), (copy, "dopamine")):
            done = qzoo("dataset", "convert", str(source), str(small / "x"), "--to", to)
            assert done.returncode == 2 and done.stderr == (
                f"qzoo: error: cannot write {small / 'x'}: Read-only file system\n"
            ), done.stderr
    finally:
        subprocess.run(["umount", str(small)], check=True)
