"""RL Unplugged's Atari TFRecord files converted without TensorFlow: the fixtures under
fixtures/rlu/ were written by TensorFlow itself (fixtures/make_rlu_fixtures.py), and
every number below is worked out from that script's formulas."""

import gzip
import json
import os
import pathlib
import shutil
import zlib

import numpy as np
import pytest

from qzoo.cli.main import main
from qzoo.errors import UserError
from qzoo.offline import dopamine
from qzoo.offline.layout import load_qzoo
from qzoo.offline.storage import DatasetStorage
from qzoo.offline.tfrecord import masked_crc, records

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "rlu")
SOURCES = {"ordered": "ordered/Pong", "v2": "v2/Pong/run_1", "prepared": "prepared"}


def frame(c, e, t):
    """The fixture script's frame of step t, episode e, checkpoint c."""
    y, x = np.mgrid[0:84, 0:84]
    return ((40 * c + 12 * e + 3 * t + x // 12 + 2 * (y // 21)) % 256).astype(np.uint8)


def convert(tmp_path, name, *extra):
    dst = tmp_path / name
    assert main(["dataset", "convert", os.path.join(FIXTURES, SOURCES[name]), str(dst),
                 "--from", "rlu", *extra]) == 0  # fmt: skip
    return dst


# Dopamine's rows of each checkpoint, by hand: 3 padding rows before every episode,
# steps 0 .. T-2 (the final observation is not stored), the last row terminal (episode
# (0, 1) was cut short: terminal too, as Dopamine stores a time limit), 3 padding rows
# after the last episode; episode (1, 1) has one step, so no transition. Rewards are
# ((7t + 3e + c) % 5 - 2) * 1.5 clipped: e.g. c=0, e=0: -3, 0, 3 -> -1, 0, 1.
# (checkpoint: (action, reward, terminal, [(row, episode, step) of frames]))
EXPECTED = {
    0: ([0, 0, 0, 0, 1, 2, 0, 0, 0, 1, 2, 0, 0, 0],
        [0, 0, 0, -1, 0, 1, 0, 0, 0, 1, -1, 0, 0, 0],
        [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0],
        [(3, 0, 0), (4, 0, 1), (5, 0, 2), (9, 1, 0), (10, 1, 1)]),
    1: ([0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 3, 0, 0, 0],
        [0, 0, 0, -1, 1, -1, 0, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0],
        [(3, 0, 0), (4, 0, 1), (5, 0, 2), (6, 0, 3), (10, 2, 0)]),
    2: ([0, 0, 0, 2, 3, 0, 0, 0],
        [0, 0, 0, 0, 1, 0, 0, 0],
        [0, 0, 0, 0, 1, 0, 0, 0],
        [(3, 0, 0), (4, 0, 1)]),
}  # fmt: skip
CAPACITY = 15  # the largest checkpoint's 14 rows, plus one unused


def check_checkpoint(arrays, suffix):
    action, reward, terminal, frames = EXPECTED[suffix]
    n = len(action)
    assert int(arrays["add_count"]) == n
    assert arrays["observation"].shape == (CAPACITY, 84, 84)
    assert arrays["action"].tolist() == action + [0] * (CAPACITY - n)
    assert arrays["reward"].tolist() == reward + [0] * (CAPACITY - n)
    assert arrays["terminal"].tolist() == terminal + [0] * (CAPACITY - n)
    # batch_rl's logger's invalid_range at cursor n: n - 1 .. n + 3 (mod the capacity).
    assert arrays["invalid_range"].tolist() == [(n - 1 + j) % CAPACITY for j in range(5)]
    stored = {row for row, _, _ in frames}
    for row, e, t in frames:
        np.testing.assert_array_equal(arrays["observation"][row], frame(suffix, e, t))
    assert not arrays["observation"][[r for r in range(CAPACITY) if r not in stored]].any()


def test_the_pixels_the_test_expects():
    # By hand: checkpoint 1, episode 2, step 0 at (y, x) = (50, 30): 40 + 24 + 2 + 2 * 2.
    assert frame(1, 2, 0)[50, 30] == 70 and frame(0, 0, 0)[0, 0] == 0


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_layout_converts_to_the_same_rows(tmp_path, name):
    dst = convert(tmp_path, name)
    checkpoints = load_qzoo(str(dst))
    suffixes = [0, 1] if name == "v2" else [0, 1, 2]  # the v2 fixture holds two
    assert sorted(checkpoints) == suffixes
    for suffix in suffixes:
        check_checkpoint(checkpoints[suffix], suffix)
    summary = json.loads((dst / "dataset.json").read_text())["rlu"]["checkpoints"]
    assert summary["0"] == {"episodes": 2, "first_episode": 0, "last_episode": 1,
                            "ended_terminal": 1, "rows": 14, "transitions": 5}  # fmt: skip
    # Dopamine's sampling rules over the result: every step but the final observation
    # is a valid transition (5 + 5 + 2), padding never is.
    storage = DatasetStorage([checkpoints[s] for s in suffixes])
    assert storage.valid_count() == {"v2": 10}.get(name, 12)


def test_frames_decoded_by_worker_processes_keep_their_order(tmp_path):
    one = convert(tmp_path, "v2", "--workers", "1")
    shutil.move(one, tmp_path / "one")
    two = convert(tmp_path, "v2", "--workers", "2")  # episodes out of order in the files
    for suffix in (0, 1):
        for name in ("observation.npy", "action.npy", "reward.npy", "terminal.npy"):
            a, b = (folder / f"ckpt.{suffix}" / name for folder in (tmp_path / "one", two))
            assert a.read_bytes() == b.read_bytes(), (suffix, name)


def test_on_to_dopamine_files(tmp_path):
    dst = convert(tmp_path, "ordered", "--to", "dopamine")
    assert sorted(os.listdir(dst)) == sorted(dopamine.file_name(a, s) for a in dopamine.DTYPES
                                             for s in range(3))  # fmt: skip
    for suffix in range(3):
        check_checkpoint(dopamine.read_checkpoint(str(dst), suffix), suffix)


def test_the_masked_crc32c_is_tensorflows():
    # CRC32C("123456789") = 0xe3069283 (RFC 3720's check value); masked by hand:
    # rotated right by 15 bits = 0x2507c60d, plus 0xa282ead8 (mod 2**32).
    assert masked_crc(b"123456789") == 0xC78AB0E5
    first = next(records(os.path.join(FIXTURES, "ordered", "Pong", "run_1-00000-of-00003")))
    assert first.startswith(b"\n")  # an Example: field 1 (features), length-delimited


def test_a_flipped_byte_is_refused_by_the_crc(tmp_path, capsys):
    source = os.path.join(FIXTURES, "ordered", "Pong", "run_1-00001-of-00003")
    with gzip.open(source, "rb") as f:
        data = bytearray(f.read())
    data[200] ^= 0x01  # inside record 0's data (its 12-byte header comes first)
    bad = tmp_path / "bad"
    bad.mkdir()
    with gzip.open(bad / "run_1-00000-of-00001", "wb") as f:  # a valid gzip stream
        f.write(bytes(data))
    dst = tmp_path / "out"
    assert main(["dataset", "convert", str(bad), str(dst), "--from", "rlu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "record 0 (byte 0)" in err and "CRC32C" in err, err
    assert not dst.exists() or not os.listdir(dst)  # nothing half-written left
    # Cut short: refused too, naming the record it ends in.
    with gzip.open(bad / "run_1-00000-of-00001", "wb") as f:
        f.write(bytes(data[:150]))
    assert main(["dataset", "convert", str(bad), str(dst), "--from", "rlu"]) == 2
    assert "ends inside record 0" in capsys.readouterr().err
    # A flipped byte in the compressed file itself: gzip's CRC (or inflate) refuses it.
    raw = bytearray(pathlib.Path(source).read_bytes())
    raw[len(raw) // 2] ^= 0x40
    (bad / "run_1-00000-of-00001").write_bytes(bytes(raw))
    assert main(["dataset", "convert", str(bad), str(dst), "--from", "rlu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "run_1-00000-of-00001" in err and "\n" not in err, err


def test_sources_that_cannot_be_converted_are_refused_in_one_line(tmp_path, capsys):
    cases = {
        os.path.join(FIXTURES, "sarsa", "Pong"): "shuffled SARSA transition",
        str(tmp_path / "nothing"): "no such file",
        str(tmp_path): "holds no TFRecord shard",
    }
    for src, expected in cases.items():
        assert main(["dataset", "convert", src, str(tmp_path / "o"), "--from", "rlu"]) == 2
        err = capsys.readouterr().err.strip()
        assert expected in err and "\n" not in err, err
    two = tmp_path / "two"
    two.mkdir()
    for run in (1, 2):
        shutil.copy(os.path.join(FIXTURES, "v2", "Pong", "run_1-00000-of-00002"),
                    two / f"run_{run}-00000-of-00002")  # fmt: skip
    assert main(["dataset", "convert", str(two), str(tmp_path / "o"), "--from", "rlu"]) == 2
    assert "2 runs" in capsys.readouterr().err
    assert main(["dataset", "convert", str(two), str(tmp_path / "o")]) == 2
    assert "--to" in capsys.readouterr().err
    assert main(["dataset", "convert", str(two), str(tmp_path / "o"), "--to", "qzoo",
                 "--workers", "2"]) == 2  # fmt: skip
    assert "only with --from rlu" in capsys.readouterr().err


def test_unclipped_rewards_are_clipped_where_no_clipped_field_is_stored():
    from qzoo.offline.rlu import episode
    from qzoo.offline.tf_example import messages

    example = messages()["Example"]()
    features = example.features.feature
    features["steps/observation"].bytes_list.value.extend([b"a", b"b", b"c"])
    features["steps/action"].int64_list.value.extend([2, 0, 0])
    features["steps/reward"].float_list.value.extend([-4.0, 0.25, 0.0])
    features["steps/is_terminal"].int64_list.value.extend([0, 0, 1])
    features["checkpoint_id"].int64_list.value.append(7)
    features["episode_id"].int64_list.value.append(3)
    ep = episode(example.SerializeToString(), "here")
    assert ep["clipped_reward"].tolist() == [-1.0, 0.25, 0.0]
    assert (ep["checkpoint"], ep["episode"], ep["ended"]) == (7, 3, True)
    del features["steps/reward"]
    with pytest.raises(UserError, match="here: no steps/clipped_reward feature"):
        episode(example.SerializeToString(), "here")


def test_the_unconverted_files_are_refused_with_the_command_that_converts_them(capsys):
    folder = os.path.join(FIXTURES, "ordered", "Pong")
    assert main(["train", "offline_dqn", "--env", "pong", "--offline", folder]) == 2
    assert f"qzoo dataset convert {folder} DST --from rlu" in capsys.readouterr().err
    assert main(["dataset", "info", folder]) == 2
    assert "--from rlu" in capsys.readouterr().err


def test_offline_training_on_the_converted_dataset(tmp_path, capsys):
    dst = convert(tmp_path, "ordered")
    run_dir = tmp_path / "run"
    argv = ["train", "offline_dqn", "--env", "pong", "--offline", str(dst),
            "--offline-checkpoints", "1:", "--iterations", "1", "--train-frames", "64",
            "--eval-frames", "40", "--run-dir", str(run_dir)]  # fmt: skip
    assert main(argv) == 0
    # Checkpoints 1 and 2 only: 5 + 2 transitions; 64 frames at one update per 16.
    assert "(suffixes 1, 2), 7 transitions" in capsys.readouterr().err
    rows = (run_dir / "results.csv").read_text().splitlines()
    last = dict(zip(rows[0].split(","), rows[-1].split(",")))
    assert int(last["train_num_updates"]) == 4 and np.isfinite(float(last["train_loss"]))


def test_the_converted_copy_carries_checksums_and_a_flipped_frame_is_refused(tmp_path, capsys):
    dst = convert(tmp_path, "ordered")
    manifest = json.loads((dst / "dataset.json").read_text())
    frames = np.load(dst / "ckpt.1" / "observation.npy")
    assert manifest["crc32"]["1"]["observation"] == f"{zlib.crc32(frames.tobytes()):08x}"
    load_qzoo(str(dst))  # sound: loads
    path = dst / "ckpt.1" / "observation.npy"
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x10  # a pixel of the last frame, past the NPY header
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match="does not match its checksum"):
        load_qzoo(str(dst))
