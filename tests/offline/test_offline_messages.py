"""What a user sees from `qzoo dataset info`, `--offline` and `--log-replay`: counts at
the frame stack a dataset was logged with, and bad input as one line (exit 2) naming
the bad file or option, with nothing written."""

import gzip
import json
import os
import shutil

import numpy as np
import pytest
from helpers import replacing

from qzoo.cli.main import main
from qzoo.configuration import build_config
from qzoo.errors import UserError
from qzoo.offline import dopamine
from qzoo.offline.conversion import qzoo_layout
from qzoo.offline.writer import LoggedReplayWriter
from qzoo.run.trainer import Trainer, run

CAPACITY = 500  # rows of the logged buffer
LOGGED = {"env": "minatar/breakout", "iterations": "1", "train_frames": "1200",
          "eval_frames": "50", "replay_capacity": "3000", "min_replay_capacity_fraction": "0.1",
          "log_replay_capacity": str(CAPACITY), "learn_period": "64"}  # fmt: skip
TRAIN = ["train", "dqn", "--env", "minatar/breakout", "--iterations", "1", "--train-frames",
         "100", "--eval-frames", "50"]  # fmt: skip


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """A MinAtar run's logged dataset (frame stack 1): 1,200 rows in a buffer of 500,
    so a first pass (add_count 499), a full one (999) and a final partial one."""
    folder = tmp_path_factory.mktemp("logged") / "data"
    list(run(Trainer(build_config("dqn", {**LOGGED, "log_replay": str(folder)}))))
    return folder


@pytest.fixture
def dataset(logged, tmp_path):
    """A copy of the logged dataset that a test may damage."""
    return shutil.copytree(logged, tmp_path / "data")


def one_error_line(err, *fragments):
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("qzoo: error: "), err
    for fragment in fragments:
        assert fragment in err, err


def logs_file(folder, attribute, suffix):
    return folder / "replay_logs" / dopamine.file_name(attribute, suffix)


# -- 0. the dataset knows its game -----------------------------------------------------
def test_a_dataset_of_another_game_is_refused_naming_its_game(dataset, tmp_path, capsys):
    """Issue 34 #12: `qzoo train dqn --env minatar/asterix --offline <a breakout
    dataset>` trained without a word (MinAtar's frames and actions fit each other), and
    `qzoo dataset info` called a logged dataset's game unknown."""
    assert main(["dataset", "info", str(dataset)]) == 0
    assert capsys.readouterr().out.startswith(f"{dataset / 'replay_logs'} (minatar/breakout): ")
    argv = ["train", "dqn", "--env", "minatar/asterix", "--iterations", "1", "--train-frames",
            "100", "--eval-frames", "50", "--run-dir", str(tmp_path / "run")]  # fmt: skip
    assert main([*argv, "--offline", str(dataset)]) == 2
    assert capsys.readouterr().err == (
        f"qzoo: error: --offline {dataset}: its data is of minatar/breakout (so says "
        f"{dataset / 'replay_logs' / 'logged.json'}), not of minatar/asterix; pass --env "
        "minatar/breakout, or another dataset\n"
    )
    # A converted copy knows it too, and so does the published layout's path.
    copy = tmp_path / "copy"
    assert main(["dataset", "convert", str(dataset), str(copy), "--to", "qzoo"]) == 0
    assert main([*argv, "--offline", str(copy)]) == 2
    assert "its data is of minatar/breakout (so says" in capsys.readouterr().err
    published = tmp_path / "Breakout" / "1"
    shutil.copytree(dataset / "replay_logs", published / "replay_logs")
    os.unlink(published / "replay_logs" / "logged.json")
    argv[3] = "pong"
    assert main([*argv, "--offline", str(published)]) == 2
    assert capsys.readouterr().err.endswith(
        f"its data is of Breakout (so says the path {published / 'replay_logs'}), not of "
        "pong; pass --env breakout, or another dataset\n"
    )
    assert not (tmp_path / "run").exists()


# -- 1. dataset info counts at the logged stack --------------------------------------
def test_info_counts_a_minatar_dataset_at_its_stack_of_1(logged, tmp_path, capsys):
    assert main(["dataset", "info", str(logged), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    add_counts = [c["add_count"] for c in report["checkpoints"]]
    assert add_counts[:2] == [499, 999] and 0 < add_counts[2] < CAPACITY
    # By hand, stack K = 1, n = 1, cursor = add_count mod C (Dopamine's index rules): a
    # file not yet full draws i from [0, cursor - 1), and invalid_range (cursor - 1,
    # cursor) lies outside it: add_count - 1 transitions. A full one draws the ages
    # 0 .. C - 2 after the cursor, and the row at age 0 is the cursor, in
    # invalid_range: C - 2. No stack spans a terminal row with K = 1.
    expected = [499 - 1, CAPACITY - 2, add_counts[2] - 1]
    assert [c["transitions"] for c in report["checkpoints"]] == expected
    assert report["transitions"] == sum(expected) and report["stack"] == 1
    # Counted at Dopamine's stack of 4 (the old default), frames across an episode's
    # start are dropped: fewer, and the text says which stack the count is for.
    assert main(["dataset", "info", str(logged), "--stack", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["transitions"] < sum(expected)
    assert main(["dataset", "info", str(logged)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert f"{sum(expected):,} transitions (frame stack 1, as logged)" in first
    # The memory-mappable layout keeps invalid_range, so it tells the same.
    assert main(["dataset", "convert", str(logged), str(tmp_path / "q"), "--to", "qzoo"]) == 0
    capsys.readouterr()
    assert main(["dataset", "info", str(tmp_path / "q"), "--json"]) == 0
    converted = json.loads(capsys.readouterr().out)
    assert converted["transitions"] == sum(expected) and converted["stack"] == 1


def episodes(writer, lengths):
    k = 1
    for length in lengths:
        for step in range(length):
            writer.add(np.full((84, 84), k, np.uint8), 1 + k % 3, 1.0, step == length - 1)
            k += 1


@pytest.mark.parametrize(
    "stack, horizon, shown, source",
    [(4, 1, 4, "files"), (2, 1, 2, "files"), (4, 3, 4, "default"), (1, 2, 4, "default")],
)
def test_the_stack_is_told_by_invalid_range_and_padding_rows(tmp_path, capsys, stack, horizon,
                                                             shown, source):  # fmt: skip
    """invalid_range holds n + K rows: K is its length - 1 for the n = 1 that qzoo and
    batch_rl log with, unless the padding rows contradict it (n > 1); then Dopamine's 4."""
    writer = LoggedReplayWriter(tmp_path, 60, (84, 84), stack=stack, update_horizon=horizon)
    episodes(writer, [5, 7, 3, 9])
    writer.close()
    assert main(["dataset", "info", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["stack"], report["stack_from"]) == (shown, source)
    assert main(["dataset", "info", str(tmp_path), "--stack", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["stack"], report["stack_from"]) == (3, "option")


# -- 2. an automatic conversion that fails is one line --------------------------------
def truncate_frames(folder):
    path = logs_file(folder, "observation", 1)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    return path


def corrupt_frames(folder):
    """Bits flipped inside the compressed data, the trailer intact (a bad copy or disk):
    the data most often decode to more bytes than the header says, then fail gzip's
    checksum; once the message blamed the extra bytes."""
    path = logs_file(folder, "observation", 1)
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 3, len(data) // 3 + 64, 4):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    return path


def garble_actions(folder):
    path = logs_file(folder, "action", 2)
    path.write_bytes(b"not gzip at all")
    return path


@pytest.mark.parametrize("damage, problem", [(truncate_frames, "is truncated"),
                                             (garble_actions, "is not readable gzip")])  # fmt: skip
def test_a_failed_conversion_is_one_line_and_writes_nothing(dataset, tmp_path, capsys, damage,
                                                            problem):  # fmt: skip
    path = damage(dataset)
    run_dir = tmp_path / "run"
    assert main([*TRAIN, "--offline", str(dataset), "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    one_error_line(err, str(path), problem)
    assert "converting" not in err
    assert not (dataset / "qzoo").exists() and not run_dir.exists()
    # `qzoo dataset convert` checks first too: no half-written destination.
    assert main(["dataset", "convert", str(dataset), str(tmp_path / "q"), "--to", "qzoo"]) == 2
    one_error_line(capsys.readouterr().err, str(path), problem)
    assert not (tmp_path / "q").exists()


def test_a_corrupt_file_is_named_as_corrupt_gzip_and_nothing_is_kept(dataset, tmp_path, capsys):
    """Its length is intact, so the check before converting passes; the conversion meets
    it, after its note or progress lines, and names it as a corrupt gzip file."""
    path = corrupt_frames(dataset)
    problem = "is a corrupt or truncated gzip file (CRC check failed"
    assert main(["dataset", "convert", str(dataset), str(tmp_path / "q"), "--to", "qzoo"]) == 2
    *progress, error = capsys.readouterr().err.splitlines()  # checkpoint 0 -> ...
    assert all(line.startswith("checkpoint ") for line in progress) and "bytes after" not in error
    one_error_line(error + "\n", str(path), problem)
    assert not (tmp_path / "q").exists() or os.listdir(tmp_path / "q") == []
    run_dir = tmp_path / "run"
    assert main([*TRAIN, "--offline", str(dataset), "--run-dir", str(run_dir)]) == 2
    note, error = capsys.readouterr().err.splitlines()
    assert note.startswith("offline: converting ") and "bytes after" not in error
    one_error_line(error + "\n", str(path), problem)
    assert not run_dir.exists()  # (the copy has no manifest: the next start redoes it whole)


def test_a_multi_member_gzip_file_is_read_whole_not_refused(tmp_path):
    """The cheap completeness check reads a gzip file's trailer, which gives the length
    of its last member only: a file of several members is counted whole instead."""
    path = tmp_path / "frames.gz"
    array = np.arange(3 * 4 * 4, dtype=np.uint8).reshape(3, 4, 4)
    dopamine.write_array(path, array)
    data = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(data[:100]) + gzip.compress(data[100:]))
    assert dopamine.read_shape(path, "observation", whole=True) == (3, 4, 4)
    np.testing.assert_array_equal(dopamine.read_array(path, "observation"), array)
    path.write_bytes(gzip.compress(data[:100]) + gzip.compress(data[100:-5]))
    with pytest.raises(UserError, match="is truncated"):
        dopamine.read_shape(path, "observation", whole=True)


# -- 3. a truncated .npy of the memory-mappable layout --------------------------------
@pytest.mark.parametrize("attribute, size, problem", [
    ("observation", 1000, "is truncated (1,000 of its "), ("action", 0, "is empty (truncated)"),
])  # fmt: skip
def test_a_truncated_npy_file_is_one_line_saying_what_to_do(logged, tmp_path, capsys, attribute,
                                                            size, problem):  # fmt: skip
    converted = tmp_path / "q"
    assert main(["dataset", "convert", str(logged), str(converted), "--to", "qzoo"]) == 0
    capsys.readouterr()
    path = converted / "ckpt.0" / f"{attribute}.npy"
    os.truncate(path, size)
    assert main(["dataset", "info", str(converted)]) == 2
    one_error_line(capsys.readouterr().err, str(path), problem, "convert the dataset again")
    run_dir = tmp_path / "run"
    assert main([*TRAIN, "--offline", str(converted), "--run-dir", str(run_dir)]) == 2
    one_error_line(capsys.readouterr().err, str(path), problem)
    assert not run_dir.exists()


def test_a_truncated_file_of_offlines_own_copy_says_to_delete_it(dataset, tmp_path, capsys):
    cache = qzoo_layout(str(dataset))  # the copy a first --offline run makes
    capsys.readouterr()
    path = os.path.join(cache, "ckpt.1", "observation.npy")
    os.truncate(path, 1000)
    run_dir = tmp_path / "run"
    # --offline-reload 1 opens one checkpoint at a time: still refused at the start.
    for extra in ([], ["--offline-reload", "1"]):
        argv = [*TRAIN, "--offline", str(dataset), "--run-dir", str(run_dir), *extra]
        assert main(argv) == 2
        one_error_line(capsys.readouterr().err, path, "is truncated (1,000 of its ",
                       f"delete {cache}, the memory-mappable copy `--offline {dataset}` made")  # fmt: skip
        assert not run_dir.exists()
    shutil.rmtree(cache)  # as the message says: converted again, and the run trains
    assert main([*TRAIN, "--offline", str(dataset), "--run-dir", str(run_dir)]) == 0
    assert "converting" in capsys.readouterr().err


# -- 4. --log-replay naming a file ------------------------------------------------------
def test_log_replay_into_a_file_is_refused_naming_the_option(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    run_dir = tmp_path / "run"
    online = replacing(TRAIN, ["--train-frames", "1200", "--replay-capacity", "3000",
                               "--min-replay-capacity-fraction", "0.1", "--run-dir", str(run_dir)])  # fmt: skip
    assert main([*online, "--log-replay", str(afile)]) == 2
    one_error_line(capsys.readouterr().err,
                   f"--log-replay {afile}: it is a file; expected a folder")  # fmt: skip
    # Its replay_logs/ (or the writer's .staging/) a file: the same, naming that path.
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "replay_logs").write_text("mine")
    assert main([*online, "--log-replay", str(folder)]) == 2
    one_error_line(capsys.readouterr().err,
                   f"--log-replay {folder}: {folder / 'replay_logs'} is a file; expected a folder")  # fmt: skip
    assert afile.read_text() == "mine" and (folder / "replay_logs").read_text() == "mine"
    assert not run_dir.exists() and sorted(os.listdir(folder)) == ["replay_logs"]
    # CartPole cannot be logged at all (float observations): that refusal comes first,
    # one line naming the option too.
    cartpole = ["train", "dqn", "--env", "CartPole-v1", "--log-replay", str(afile)]
    assert main([*cartpole, "--run-dir", str(run_dir)]) == 2
    one_error_line(capsys.readouterr().err, f"--log-replay {afile}: ")
    assert afile.read_text() == "mine" and not run_dir.exists()


def test_a_damaged_staging_file_is_one_line_and_rebuilt_once_deleted(tmp_path, capsys):
    """A resumed --log-replay run whose staging copy was cut short is refused (it holds
    rows not yet in a snapshot), and resumes once the folder is deleted as it says."""
    data, run_dir = tmp_path / "data", tmp_path / "run"
    argv = ["train", "dqn", *(f"--{k.replace('_', '-')}={v}" for k, v in LOGGED.items()),
            "--log-replay", str(data), "--run-dir", str(run_dir), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    staged = data / ".staging" / "observation.npy"
    with open(staged, "r+b") as f:
        f.truncate(1000)
    more = replacing(argv, ["--iterations", "2", "--accept-changes", "iterations"])
    capsys.readouterr()
    assert main(more) == 2
    one_error_line(capsys.readouterr().err, str(staged), "is truncated or corrupt",
                   f"delete {data / '.staging'} and resume")  # fmt: skip
    shutil.rmtree(data / ".staging")
    assert main(more) == 0
    assert len((run_dir / "results.csv").read_text().splitlines()) == 1 + 3


def test_a_conversion_that_meets_a_corrupt_file_removes_what_it_wrote(dataset, tmp_path,
                                                                      capsys):  # fmt: skip
    """A byte changed inside a gzip stream passes the trailer check and shows only as
    the frames are decompressed: `dataset convert` then leaves its destination empty."""
    path = logs_file(dataset, "observation", 2)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    dst = tmp_path / "q"
    assert main(["dataset", "convert", str(dataset), str(dst), "--to", "qzoo"]) == 2
    one_error_line(capsys.readouterr().err.splitlines()[-1] + "\n", str(path))
    assert not dst.exists()  # the folder the command made
    dst.mkdir()  # one the user made stays, empty: the next conversion may write there
    assert main(["dataset", "convert", str(dataset), str(dst), "--to", "qzoo"]) == 2
    one_error_line(capsys.readouterr().err.splitlines()[-1] + "\n", str(path))
    assert os.listdir(dst) == []
