"""The DQN Replay Dataset format (batch_rl_dopamine.md §1), on small files written here:
the writer's rows, padding, snapshots and invalid_range; reading back; bad files; and
sampling by Dopamine's rules, against a reference written loop by loop from §1.4."""

import gzip
import io
import json
import mmap
import os
import pickle

import numpy as np
import pytest
from helpers import episodes

from qzoo.errors import UserError
from qzoo.offline import dopamine
from qzoo.offline.layout import load_qzoo
from qzoo.offline.storage import DatasetStorage
from qzoo.offline.writer import LoggedReplayWriter
from qzoo.replay import Replay, UniformSampler

K = 4  # Dopamine's stack


def test_rows_padding_and_add_count(tmp_path):
    writer = LoggedReplayWriter(tmp_path, 100, (2, 2))
    episodes(writer, [3, 2])
    # 3 padding rows, 3 real rows (the last terminal), 3 padding rows, 2 real rows.
    assert writer.add_count == 11
    assert writer.observation[:11, 0, 0].tolist() == [0, 0, 0, 1, 2, 3, 0, 0, 0, 4, 5]
    assert writer.terminal[:11].tolist() == [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert writer.action[:3].tolist() == [0, 0, 0] and writer.reward[:3].tolist() == [0, 0, 0]
    assert writer.invalid_range().tolist() == [10, 11, 12, 13, 14]  # cursor - 1 .. cursor + 3


def test_full_snapshot_then_final_partial(tmp_path):
    writer = LoggedReplayWriter(tmp_path, 20, (2, 2))
    episodes(writer, [10, 10])  # 3 + 10 + 3 + 10 = 26 rows: one snapshot at add_count 19
    assert dopamine.suffixes(tmp_path) == [0]
    first = dopamine.read_checkpoint(tmp_path, 0)
    assert int(first["add_count"]) == 19
    assert first["invalid_range"].tolist() == [18, 19, 0, 1, 2]  # the spec's [C-2, C-1, 0, 1, 2]
    writer.close()
    final = dopamine.read_checkpoint(tmp_path, 1)
    assert int(final["add_count"]) == 26 % 20  # the cursor: a buffer that is not full
    np.testing.assert_array_equal(final["observation"], writer.observation)
    assert len(os.listdir(tmp_path)) == 12 and final["episode_end_indices"] is None


def test_no_final_partial_snapshot_repeats_a_full_one(tmp_path):
    """A run whose last row completes a full snapshot (add_count mod C = C - 1) has
    nothing left for a final one: batch_rl's log_final_buffer would write the same rows
    again, and an offline run count them twice."""
    writer = LoggedReplayWriter(tmp_path, 20, (2, 2))
    episodes(writer, [7, 6])  # 3 + 7 + 3 + 6 = 19 rows: the snapshot at add_count 19
    assert writer.add_count == 19 and dopamine.suffixes(tmp_path) == [0]
    writer.close()
    assert dopamine.suffixes(tmp_path) == [0]
    episodes(writer, [1], start=20)  # one more episode: 4 rows, now a partial pass
    writer.close()
    assert dopamine.suffixes(tmp_path) == [0, 1]
    assert int(dopamine.read_checkpoint(tmp_path, 1)["add_count"]) == 23 % 20


def test_a_checkpoint_with_a_missing_file_is_refused_naming_it(tmp_path):
    writer = LoggedReplayWriter(tmp_path, 20, (2, 2))
    episodes(writer, [10, 10])
    writer.close()
    os.remove(tmp_path / "$store$_terminal_ckpt.1.gz")
    with pytest.raises(UserError, match=r"terminal_ckpt\.1\.gz: missing; a checkpoint suffix"):
        dopamine.suffixes(tmp_path)
    (tmp_path / "notes_ckpt.7.gz").write_bytes(b"")  # not one of the six: not a suffix
    os.remove(tmp_path / "$store$_observation_ckpt.1.gz")
    for name in os.listdir(tmp_path):
        if "_ckpt.1." in name:
            os.remove(tmp_path / name)
    assert dopamine.suffixes(tmp_path) == [0]


def test_an_episode_start_near_the_wrap_does_not_skip_a_snapshot(tmp_path):
    """batch_rl checks after each add() (4 rows at an episode start) and skips the pass;
    qzoo checks after each row."""
    writer = LoggedReplayWriter(tmp_path, 20, (2, 2))
    episodes(writer, [14])  # add_count 17 = C - 3; the next add writes 4 rows: 18..21
    assert writer.add_count == 17 and dopamine.suffixes(tmp_path) == []
    episodes(writer, [1])
    assert writer.add_count == 21 and dopamine.suffixes(tmp_path) == [0]


def test_files_are_npy_v1_exactly_as_numpy_saves_them(tmp_path):
    writer = LoggedReplayWriter(tmp_path, 20, (3, 2))
    episodes(writer, [5])
    writer.close()
    for attribute in dopamine.DTYPES:
        with gzip.open(tmp_path / dopamine.file_name(attribute, 0), "rb") as f:
            stored = f.read()
        expected = io.BytesIO()
        np.save(expected, getattr(writer, attribute) if attribute in dopamine.STORE else
                dopamine.read_array(tmp_path / dopamine.file_name(attribute, 0), attribute),
                allow_pickle=False)  # fmt: skip
        assert stored == expected.getvalue(), attribute
        assert stored[:8] == b"\x93NUMPY\x01\x00"


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"not gzip at all", "is not readable gzip"),
        # mtime=0: the test ids hold these bytes, and the workers of a parallel run
        # (pytest-xdist) must collect the same ids whatever second each collects in.
        (gzip.compress(b"just text", mtime=0), "is not an NPY array"),
        (
            gzip.compress(pickle.dumps(np.zeros(3)), mtime=0),
            "holds a pickle where an array belongs",
        ),
        ("float64", "has dtype float64, not int32"),
        ("truncated", "is truncated"),
        ("object", "holds Python objects"),
        ("extra", "has bytes after its array (a sound gzip file; its NPY header says fewer)"),
        ("corrupt", "is a corrupt or truncated gzip file (CRC check failed"),
    ],
)
def test_bad_files_are_one_line_naming_the_file(tmp_path, content, problem):
    writer = LoggedReplayWriter(tmp_path, 20, (2, 2))
    episodes(writer, [5])
    writer.close()
    path = tmp_path / dopamine.file_name("action", 0)
    if content == "float64":
        dopamine.write_array(path, np.zeros(20, np.float64))
    elif content == "truncated":
        path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())[:-7]))
    elif content == "extra":
        path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes()) + b"more"))
    elif content == "corrupt":  # the last data byte changed: the checksum catches it
        data = bytearray(gzip.decompress(path.read_bytes()))
        data[-1] ^= 1
        packed = bytearray(gzip.compress(bytes(data)))
        packed[-8:-4] = gzip.compress(gzip.decompress(path.read_bytes()))[-8:-4]  # old CRC
        path.write_bytes(bytes(packed))
    elif content == "object":
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, np.array([{}], object), allow_pickle=True)
        path.write_bytes(gzip.compress(buffer.getvalue()))
    else:
        path.write_bytes(content)
    with pytest.raises(UserError) as error:
        dopamine.read_checkpoint(tmp_path, 0)
    message = str(error.value)
    assert str(path) in message and problem in message and "\n" not in message


def test_missing_file_and_episode_end_indices(tmp_path):
    writer = LoggedReplayWriter(tmp_path, 20, (2, 2))
    episodes(writer, [5])
    writer.close()
    ends = tmp_path / "episode_end_indices_ckpt.0.gz"
    ends.write_bytes(gzip.compress(pickle.dumps({7, 9})))
    assert dopamine.read_checkpoint(tmp_path, 0)["episode_end_indices"] == {7, 9}
    planted = tmp_path / "planted"

    class Evil:
        def __reduce__(self):
            return (open, (str(planted), "w"))

    ends.write_bytes(gzip.compress(pickle.dumps(Evil())))
    with pytest.raises(UserError, match="is not a pickled set of ints"):
        dopamine.read_checkpoint(tmp_path, 0)
    assert not planted.exists()  # nothing was built
    os.remove(tmp_path / dopamine.file_name("reward", 0))
    with pytest.raises(UserError, match=r"reward_ckpt\.0\.gz: missing"):
        dopamine.suffixes(tmp_path)
    with pytest.raises(UserError, match="missing"):
        dopamine.read_checkpoint(tmp_path, 0)


# ---- sampling, against a reference written from §1.4 -------------------------------
def reference_valid(data, i, n=1):
    """Dopamine's is_valid_transition, condition by condition."""
    C, add_count = len(data["action"]), int(data["add_count"])
    cursor, full = add_count % C, add_count >= C
    if i < 0 or i >= C:
        return False
    if not full and (i >= cursor - n or i < K - 1):
        return False
    # When full, drawn from randint(cursor - C + K - 1, cursor - n), taken mod C.
    if full and i not in {j % C for j in range(cursor - C + K - 1, cursor - n)}:
        return False
    if i in set(data["invalid_range"].tolist()):
        return False
    return not any(data["terminal"][(i - k) % C] for k in range(1, K))


def reference_transition(data, i, n, gamma):
    C = len(data["action"])
    state = np.stack([data["observation"][(i - K + 1 + k) % C] for k in range(K)])
    length, terminal, reward = n, 0, 0.0
    for j in range(n):
        reward += gamma**j * data["reward"][(i + j) % C]
        if data["terminal"][(i + j) % C]:
            length, terminal = j + 1, 1
            break
    nxt = (i + length) % C
    next_state = np.stack([data["observation"][(nxt - K + 1 + k) % C] for k in range(K)])
    return state, data["action"][i], reward, next_state, terminal


@pytest.mark.parametrize("n", [1, 3])
def test_every_index_matches_the_reference(tmp_path, n):
    writer = LoggedReplayWriter(tmp_path, 30, (2, 2))
    episodes(writer, [7, 1, 9, 4, 12, 6, 8, 10])  # 3 * 8 padding + 57 rows = 81 rows
    writer.close()
    files = [dopamine.read_checkpoint(tmp_path, s) for s in dopamine.suffixes(tmp_path)]
    # Snapshots at add_count 29 (not yet full, as the dataset's suffix 0), 59 (full,
    # wrapped) and the final partial one (add_count 81 mod 30 = 21).
    assert [int(f["add_count"]) for f in files] == [29, 59, 21]
    storage = DatasetStorage(files, stack=K, n_steps=n, discount=0.9)
    for b, data in enumerate(files):
        rows = np.arange(30)
        valid = storage.valid(rows, np.full(30, b))
        assert valid.tolist() == [reference_valid(data, i, n) for i in range(30)]
        t = np.flatnonzero(valid)
        batch = storage.gather(t, np.full(len(t), b))
        for k, i in enumerate(t):
            state, action, reward, next_state, terminal = reference_transition(data, i, n, 0.9)
            np.testing.assert_array_equal(batch.s_tm1[k], state)
            np.testing.assert_array_equal(batch.s_t[k], next_state)
            assert batch.a_tm1[k] == action and batch.r_t[k] == pytest.approx(reward)
            assert batch.discount_t[k] == pytest.approx(0.0 if terminal else 0.9**n)
    # The padding rows are never valid states; the first real frame of an episode is,
    # with three zero frames before it.
    first = files[0]
    starts = [i for i in range(30) if reference_valid(first, i) and
              first["observation"][(i - 1) % 30].max() == 0]  # fmt: skip
    assert starts and all(
        storage.gather(np.array([i]), np.array([0])).s_tm1[0, :3].max() == 0 for i in starts
    )


def test_uniform_sampler_draws_only_valid_transitions_of_every_file(tmp_path):
    writer = LoggedReplayWriter(tmp_path, 30, (2, 2))
    episodes(writer, [7, 1, 9, 4, 12, 6, 8, 10])
    writer.close()
    files = [dopamine.read_checkpoint(tmp_path, s) for s in dopamine.suffixes(tmp_path)]
    storage = DatasetStorage(files)
    replay = Replay(storage, UniformSampler(storage, np.random.default_rng(0)))
    seen = set()
    for _ in range(100):
        batch = replay.sample(32)
        t, b = batch.indices
        assert storage.valid(t, b).all()
        seen.update(zip(t.tolist(), b.tolist()))
    every = {(i, b) for b, d in enumerate(files) for i in range(30) if reference_valid(d, i)}
    assert seen == every


@pytest.mark.parametrize("shape", [(84, 84), (10, 10)])
def test_atari_and_small_shaped_files_round_trip(tmp_path, shape):
    writer = LoggedReplayWriter(tmp_path, 40, shape)
    episodes(writer, [12, 30, 9])
    writer.close()
    files = [dopamine.read_checkpoint(tmp_path, s) for s in dopamine.suffixes(tmp_path)]
    assert [int(f["add_count"]) for f in files] == [39, 60 % 40]
    np.testing.assert_array_equal(files[-1]["observation"], writer.observation)
    storage = DatasetStorage(files)
    batch = Replay(storage, UniformSampler(storage, np.random.default_rng(1))).sample(8)
    assert batch.s_tm1.shape == (8, K) + shape and batch.s_tm1.dtype == np.uint8


def test_dataset_info_and_a_round_trip_through_the_qzoo_layout(tmp_path, capsys):
    from qzoo.cli.main import main

    source = tmp_path / "Pong" / "1" / "replay_logs"
    writer = LoggedReplayWriter(source, 30, (84, 84))
    episodes(writer, [7, 1, 9, 4, 12, 6, 8, 10])
    writer.close()
    assert main(["dataset", "info", str(tmp_path / "Pong" / "1"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["game"] == "Pong" and [c["add_count"] for c in report["checkpoints"]] == [
        29, 59, 21,
    ]  # fmt: skip
    files = [dopamine.read_checkpoint(source, s) for s in dopamine.suffixes(source)]
    counts = [DatasetStorage([f]).valid_count() for f in files]
    assert [c["transitions"] for c in report["checkpoints"]] == counts
    assert report["transitions"] == sum(counts) and report["bytes"] > 0
    assert main(["dataset", "convert", str(source), str(tmp_path / "q"), "--to", "qzoo"]) == 0
    mapped = load_qzoo(tmp_path / "q")
    assert isinstance(mapped[0]["observation"], np.memmap)
    assert main(["dataset", "info", str(tmp_path / "q"), "--json"]) == 0  # convert's layout
    converted = json.loads(capsys.readouterr().out)
    assert [c["transitions"] for c in converted["checkpoints"]] == counts
    assert [c["add_count"] for c in converted["checkpoints"]] == [29, 59, 21]
    back = tmp_path / "back"
    assert main(["dataset", "convert", str(tmp_path / "q"), str(back), "--to", "dopamine"]) == 0
    for suffix, original in zip(dopamine.suffixes(source), files):
        again = dopamine.read_checkpoint(back, suffix)
        for attribute in dopamine.DTYPES:
            np.testing.assert_array_equal(again[attribute], original[attribute])
            assert again[attribute].dtype == original[attribute].dtype
    assert main(["dataset", "info", str(tmp_path / "nothing")]) == 2
    assert "nothing" in capsys.readouterr().err
    # Into a folder that holds anything (here the first conversion's): refused, unchanged.
    before = sorted(os.listdir(back))
    for dst, to in ((back, "dopamine"), (tmp_path / "q", "qzoo")):
        assert main(["dataset", "convert", str(tmp_path / "q"), str(dst), "--to", to]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"qzoo: error: convert: {dst} is not empty") and err.count("\n") == 1
    assert sorted(os.listdir(back)) == before


def test_can_sample_does_not_rescan_the_dataset(tmp_path, monkeypatch):
    """The learner asks before every update; a pass over every row each time made
    offline training 3.4 times slower than online (benchmarks/offline.py)."""
    writer = LoggedReplayWriter(tmp_path, 40, (2, 2))
    episodes(writer, [12, 30, 9])
    writer.close()
    storage = DatasetStorage([dopamine.read_checkpoint(tmp_path, s) for s in (0, 1)])
    assert storage.can_sample()
    calls = []
    monkeypatch.setattr(storage, "valid", lambda t, b: calls.append(len(t)))
    assert all(storage.can_sample() for _ in range(100)) and calls == []


def test_first_rows_is_dopamines_buffer_of_that_capacity(tmp_path):
    """batch_rl's smaller-dataset mode: a full file seen through a capacity-N buffer
    (its cursor at add_count mod N) and the partial final file, against the reference."""
    from qzoo.offline.dataset import first_rows

    writer = LoggedReplayWriter(tmp_path, 30, (2, 2))
    episodes(writer, [7, 1, 9, 4, 12, 6, 8, 10])
    writer.close()
    files = [dopamine.read_checkpoint(tmp_path, s) for s in dopamine.suffixes(tmp_path)]
    for rows in (20, 12):
        small = [first_rows(f, rows) for f in files]
        assert all(len(f["observation"]) == rows for f in small)
        storage = DatasetStorage(small)
        for b, data in enumerate(small):
            valid = storage.valid(np.arange(rows), np.full(rows, b))
            assert valid.tolist() == [reference_valid(data, i) for i in range(rows)]
        assert storage.full.tolist() == [True, True, int(files[2]["add_count"]) >= rows]


def _resident_bytes(path):
    """Rss of this process's mappings of `path` (/proc/self/smaps), in bytes."""
    total, mine = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
                mine = fields[-1] == str(path)
            elif mine and fields[0] == "Rss:":
                total += int(fields[1]) * 1024
    return total


def test_memory_mapped_frames_stay_under_the_resident_budget(tmp_path):
    """Frames read through the maps leave the resident set once a budget's worth was
    read, and the batches are the same as with every page kept."""
    from qzoo.offline.conversion import to_qzoo

    writer = LoggedReplayWriter(tmp_path / "logs", 3000, (84, 84))
    k = episodes(writer, [500] * 5)
    writer.close()
    to_qzoo(tmp_path / "logs", tmp_path / "q", quiet=True)
    frames = tmp_path / "q" / "ckpt.0" / "observation.npy"  # 3,000 x 7,056 B = 20 MiB

    def sample(budget, batches=40):
        storage = DatasetStorage(list(load_qzoo(tmp_path / "q").values()),
                                 resident_frame_bytes=budget)  # fmt: skip
        replay = Replay(storage, UniformSampler(storage, np.random.default_rng(3)))
        out = [replay.sample(32).s_tm1 for _ in range(batches)]
        return out, _resident_bytes(frames)

    assert k == 2501
    kept, kept_rss = sample(1 << 40)  # never released
    released, released_rss = sample(1 << 20)  # released every ~85 frames read
    assert len(kept) == len(released)
    for a, b in zip(kept, released):
        np.testing.assert_array_equal(a, b)
    # 40 batches x 32 x 8 frames touch most of the 20 MiB file when kept; released,
    # at most the budget (1 MiB) plus one batch's pages (256 x 3 pages) stay.
    assert kept_rss > 8 << 20, kept_rss
    assert released_rss <= (1 << 20) + 256 * 3 * 4096, released_rss


def test_the_writers_staging_maps_leave_the_resident_set(tmp_path):
    """--log-replay's staging buffer is memory-mapped: its written pages leave the
    process every _release_rows rows (and after a snapshot) and nothing is lost."""
    writer = LoggedReplayWriter(tmp_path / "logs", 3000, (84, 84), staging=tmp_path / "s")
    writer._release_rows = 100  # 256 MiB of rows in a run; 100 rows (690 KiB) here
    episodes(writer, [500] * 4)  # 2,012 rows
    staged = tmp_path / "s" / "observation.npy"
    assert _resident_bytes(staged) <= 101 * 7056 + 2 * 4096
    assert [int(writer.observation[r, 0, 0]) for r in (3, 502, 2011)] == [1, 244, 208]
    writer.close()  # the final snapshot reads every row back from the maps
    again = dopamine.read_checkpoint(tmp_path / "logs", 0)
    np.testing.assert_array_equal(again["observation"][:2012], writer.observation[:2012])
    assert again["observation"][2011, 0, 0] == 2000 % 256


class _Recorder:
    """Stands in for a memory map: records madvise calls."""

    def __init__(self):
        self.calls = []

    def madvise(self, option, start, length):
        self.calls.append((option, start, length))


def test_readahead_asks_for_the_pages_of_exactly_the_frames_gathered(tmp_path):
    """Before a gather the storage asks the kernel (madvise WILLNEED) for the pages of
    every frame it will read: one range per distinct row, covering that row's bytes."""
    from qzoo.offline.conversion import to_qzoo
    from qzoo.offline.dataset import first_rows

    writer = LoggedReplayWriter(tmp_path / "logs", 600, (84, 84))
    episodes(writer, [250, 300])
    writer.close()
    to_qzoo(tmp_path / "logs", tmp_path / "q", quiet=True)
    # A view starting at row 100 (--offline-transitions style slices keep row 0, so
    # take one by hand): the offsets must follow the view, not the file's row 0.
    full = load_qzoo(tmp_path / "q")[0]
    sliced = dict(full, observation=full["observation"][100:], action=full["action"][100:],
                  reward=full["reward"][100:], terminal=full["terminal"][100:])  # fmt: skip
    for data in (full, first_rows(full, 400), sliced):
        storage = DatasetStorage([data])
        m, first = storage._frame_bases[0]
        fb = 84 * 84
        for r in (0, 1, len(data["observation"]) - 1):  # the base offset is right
            assert m[first + r * fb : first + (r + 1) * fb] == data["observation"][r].tobytes()
        recorder = _Recorder()
        storage._frame_bases = [(recorder, first)]
        rows = np.array([[7, 8, 9, 10], [9, 10, 11, 12]])
        storage._read_ahead(rows, np.zeros(2, np.int64))
        assert [c[0] for c in recorder.calls] == [mmap.MADV_WILLNEED] * 6  # rows 7..12, once
        for (_, start, length), r in zip(recorder.calls, range(7, 13)):
            assert start % mmap.PAGESIZE == 0
            assert start <= first + r * fb and first + (r + 1) * fb <= start + length


def test_a_cached_conversion_is_redone_when_a_checkpoint_is_rewritten(tmp_path, capsys):
    """A resumed --log-replay run rewrites its last, partial checkpoint under the same
    suffix: the cached memory-mappable copy must follow it, not serve the old rows."""
    from qzoo.offline.conversion import qzoo_layout

    logs = tmp_path / "replay_logs"
    writer = LoggedReplayWriter(logs, 20, (2, 2))
    episodes(writer, [10, 10])  # suffix 0 full, suffix 1 partial (add_count 6)
    state = writer.state_dict()
    writer.close()
    cache = qzoo_layout(str(tmp_path))
    assert "converting" in capsys.readouterr().err
    assert qzoo_layout(str(tmp_path)) == cache and capsys.readouterr().err == ""  # reused
    assert int(load_qzoo(cache)[1]["add_count"]) == 6
    resumed = LoggedReplayWriter(logs, 20, (2, 2))  # from the state before close()
    resumed.load_state_dict(state)
    episodes(resumed, [2], start=30)  # 5 more rows: still short of a full pass
    resumed.close()  # suffix 1 again, now with add_count 11
    assert dopamine.suffixes(logs) == [0, 1]
    assert qzoo_layout(str(tmp_path)) == cache and "converting" in capsys.readouterr().err
    assert int(load_qzoo(cache)[1]["add_count"]) == 11
