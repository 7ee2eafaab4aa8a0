"""Compressed replay (--replay-compression): lossless on real Atari frames, the same
batches as the uncompressed storage for the same seed, its bytes, checkpoints, and the
errors a user can meet."""

import sys

import numpy as np
import pytest

from qzoo.cli.main import main
from qzoo.configuration.rules.compression import require
from qzoo.errors import UserError
from qzoo.replay import Row
from qzoo.replay.codecs import Codec
from qzoo.replay.compressed import CHUNK_BYTES, GROUP_ROWS, CompressedFrameStorage
from qzoo.run import checkpoint
from qzoo.run.bench import bench_storage, play_rows
from qzoo.run.state_shapes import first_mismatch

CODECS = ["lz4", "zstd"]


@pytest.fixture(scope="module")
def play():
    """Rows of Breakout played with random actions in 2 environments (real frames),
    their episode flags replaced by short synthetic episodes (every 23 rows, and an
    episode abandoned mid-way at row 50, as at a phase boundary), so that stacks and
    n-step returns cross many boundaries."""
    rows = play_rows("breakout", 2 * 160, 2)
    next(rows)
    played = list(rows)
    out = []
    for t, row in enumerate(played):
        first = np.full(2, t % 23 == 0 or t == 50)
        last = np.full(2, t % 23 == 22)
        reward = np.arange(2, dtype=np.float32) + t % 3
        out.append(Row(row.frame.copy(), row.action, reward, first, last, last & (t % 2 == 0)))
    return out


def test_real_frames_vary_and_come_back_bit_for_bit(play):
    frames = np.stack([row.frame for row in play])  # [T, 2, 84, 84]
    assert len({frame.tobytes() for frame in frames[:, 0]}) > 100  # not a still screen
    for codec in CODECS:
        storage = CompressedFrameStorage(1000, 2, (84, 84), np.uint8, 4, 4, 1, 0.99, codec)
        for row in play:
            storage.add(row)
        t, b = np.meshgrid(np.arange(len(play)), np.arange(2), indexing="ij")
        assert np.array_equal(storage.frames[t, b], frames)
        # Every group but the open one is in the arena, and decodes to its frames.
        decoder = Codec(codec)
        group = 3
        data = storage.frames.arena.view(
            storage.frames.chunk[group, 1], storage.frames.offset[group, 1],
            storage.frames.length[group, 1],
        )  # fmt: skip
        size = GROUP_ROWS * 84 * 84
        raw = np.frombuffer(decoder.decompress(data, size), np.uint8)
        assert np.array_equal(raw.reshape(GROUP_ROWS, 84, 84), frames[12:16, 1])


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("prioritized", [False, True])
def test_same_batches_as_uncompressed_for_the_same_seed(play, codec, prioritized):
    """A replay of 45 rows per environment (not a multiple of the group size) wraps
    three times; n = 3; priorities are updated after every batch."""
    plain = bench_storage(((84, 84), np.uint8, 4), 90, 2, 3, prioritized, "none", seed=7)
    packed = bench_storage(((84, 84), np.uint8, 4), 90, 2, 3, prioritized, codec, seed=7)
    rng = np.random.default_rng(0)
    compared, seen = 0, set()
    for t, row in enumerate(play):
        plain.add(row), packed.add(row)
        if t < 10 or t % 3:
            continue
        a, b = plain.sample(16), packed.sample(16)
        for name in ("s_tm1", "a_tm1", "r_t", "discount_t", "s_t", "weights"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert all(np.array_equal(x, y) for x, y in zip(a.indices, b.indices))
        priorities = rng.random(16)
        plain.update_priorities(a.indices, priorities)
        packed.update_priorities(b.indices, priorities)
        compared += 1
        # What the batches held: terminations, returns cut short, zero-padded stacks.
        seen |= {"zero discount"} if (a.discount_t == 0).any() else set()
        seen |= {"cut return"} if ((a.discount_t > 0) & (a.discount_t > 0.971)).any() else set()
        seen |= {"padding"} if (a.s_tm1[:, 0] == 0).all(axis=(1, 2)).any() else set()
    assert compared == 50  # t = 12, 15, ..., 159
    assert seen == {"zero discount", "cut return", "padding"}


@pytest.mark.parametrize("codec", CODECS)
def test_bytes_are_the_compressed_groups_and_chunks_are_freed(play, codec):
    """The arena holds each group as the codec compresses it alone, worked out here
    from the raw frames; after many wraps only the chunks of live groups remain."""
    storage = CompressedFrameStorage(40, 2, (84, 84), np.uint8, 4, 4, 1, 0.99, codec)
    frames = storage.frames
    frames.arena.chunk_bytes = 64 * 1024  # small chunks, so that wrapping frees some
    for row in play:
        storage.add(row)
    # 160 rows: the ring of 20 rows now holds rows 140..159; groups of 4 rows.
    compress = Codec(codec).compress
    for group in range(5):
        for column in range(2):
            raw = np.stack([play[140 + 4 * group + i].frame[column] for i in range(4)])
            assert frames.length[group, column] == len(compress(np.ascontiguousarray(raw)))
    payload = int(frames.length.sum())
    chunks = len(frames.arena.chunks)
    assert chunks <= payload // frames.arena.chunk_bytes + 2
    assert frames.arena.nbytes == chunks * frames.arena.chunk_bytes
    index = frames.chunk.nbytes + frames.offset.nbytes + frames.length.nbytes
    rows = sum(array.nbytes for array in storage.row_arrays)
    assert storage.nbytes == (frames.arena.nbytes + index + rows + frames.open.nbytes
                              + frames._pool.nbytes + frames._slot.nbytes)  # fmt: skip
    # Breakout's frames of play: far under the 1,500 bytes per transition asked for.
    assert payload / storage.size + 6 < 1500


@pytest.mark.parametrize("codec", CODECS)
def test_checkpoint_round_trip_then_the_same_samples(play, codec, tmp_path):
    make = lambda: bench_storage(((84, 84), np.uint8, 4), 90, 2, 3, True, codec, seed=3)
    first = make()
    for row in play[:130]:  # mid-group, after a wrap
        first.add(row)
    path = tmp_path / "replay.safetensors"
    checkpoint.save(path, first.state_dict())
    second = make()
    second.load_state_dict(checkpoint.load(path))
    assert first_mismatch(checkpoint.load(path), make().state_dict()) is None
    for row in play[130:]:
        first.add(row), second.add(row)
        a, b = first.sample(8), second.sample(8)
        assert np.array_equal(a.s_tm1, b.s_tm1) and np.array_equal(a.s_t, b.s_t)
        assert np.array_equal(a.weights, b.weights)


def test_a_compressed_run_trains_exactly_as_an_uncompressed_one_and_resumes(tmp_path):
    """Same seed, same samples: the learning is the same to the bit. The compressed
    run is saved after iteration 1 and resumed in a new trainer for iteration 2."""
    from qzoo.configuration import build_config
    from qzoo.run.trainer import WALL_CLOCK_COLUMNS, Trainer

    def config(compression):
        return build_config("dqn", {
            "env": "CartPole-v1", "iterations": "2", "train_frames": "200",
            "eval_frames": "20", "replay_capacity": "500", "prioritized": "true",
            "min_replay_capacity_fraction": "0.2", "replay_compression": compression,
        })  # fmt: skip

    def rows(trainer, n):
        return [
            {k: repr(v) for k, v in trainer.run_iteration().items() if k not in WALL_CLOCK_COLUMNS}
            for _ in range(n)
        ]

    expected = rows(Trainer(config("none")), 3)  # iteration 0 only evaluates
    first = Trainer(config("lz4"))
    got = rows(first, 2)
    path = tmp_path / "latest.safetensors"
    checkpoint.save(path, first.state_dict())
    second = Trainer(config("lz4"))
    state = checkpoint.load(path)
    assert first_mismatch(state, second.state_dict()) is None
    second.load_state_dict(state)
    got += rows(second, 1)
    assert got == expected
    assert float(expected[1]["train_num_updates"]) > 0  # learning before the save too


def test_bad_codec_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["train", "dqn", "--env", "CartPole-v1", "--replay-compression", "snappy"]
    assert main(argv + ["--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("qzoo: error: --replay-compression: bad value snappy; expected one of "
                   "none, lz4, zstd")  # fmt: skip
    assert main(["bench", "replay", "--replay-compression", "gzip"]) == 2
    assert "--replay-compression: bad value gzip" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("codec, package", [("zstd", "zstandard"), ("lz4", "lz4")])
def test_a_missing_codec_package_names_the_pip_install(codec, package, tmp_path, monkeypatch,
                                                       capsys):  # fmt: skip
    for module in ("zstandard", "lz4", "lz4.block"):  # None in sys.modules: ImportError
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.chdir(tmp_path)
    expected = (f"--replay-compression {codec} needs the {package} package: pip install "
                f"'qzoo[compression]' (or pip install {package})")  # fmt: skip
    with pytest.raises(UserError) as error:
        require(codec)
    assert str(error.value) == expected
    for argv in (["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "run")],
                 ["bench", "replay", "--capacity", "100"]):  # fmt: skip
        assert main(argv + ["--replay-compression", codec]) == 2
        assert capsys.readouterr().err.strip() == "qzoo: error: " + expected
    assert list(tmp_path.iterdir()) == []


def test_offline_and_recurrent_runs_refuse_compression(tmp_path):
    """Their replays (a dataset, R2D1's sequences) are not the frame replay."""
    from qzoo.configuration import build_config

    for agent, options in (("dqn", {"offline": str(tmp_path)}), ("r2d1", {})):
        with pytest.raises(UserError, match="--replay-compression: bad value lz4; expected none"):
            build_config(agent, {"env": "pong", "replay_compression": "lz4", **options},
                         strict=True)  # fmt: skip


def test_the_bench_fills_the_replay_with_frames_of_play(capsys):
    import json

    from qzoo.run.bench import bench_replay

    bench_replay(env="breakout", replay_compression="lz4", capacity=100, seconds=0.05)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_name = {line["name"]: line for line in lines}
    assert by_name["replay_batches_per_second"]["value"] > 0
    assert by_name["replay_batches_per_second"]["env"] == "breakout"
    # 100 transitions: one 1 MiB chunk and the buffers, but not 7,061 bytes a frame.
    stored = by_name["replay_bytes_per_transition"]["value"] * 100
    assert CHUNK_BYTES < stored < CHUNK_BYTES + 100 * 7061


def test_the_memory_check_estimates_a_quarter_of_each_frame():
    """By hand, 1,000 Atari transitions in 1 environment: frames at a quarter of 7,056
    bytes (1,764) + action and flags, reward (1 + 4) + the group index (20 / 4 = 5) per
    transition, plus a decode pool of 256 groups and the open group (257 x 4 x 7,056)
    and two 1 MiB chunks."""
    from qzoo.replay.compressed import bytes_estimate

    expected = 1000 * (1764 + 5 + 5) + 257 * 4 * 7056 + 2 * 2**20
    assert bytes_estimate(1000, 1, (84, 84), np.uint8, 18) == expected == 11_124_720


def test_lz4_decodes_a_prefix_of_a_group_in_place(play):
    """The direct path writes exactly the bytes asked for (two of a group's four
    frames), where it is told, and nothing past them."""
    codec = Codec("lz4")
    if codec.decode_into is None:
        pytest.skip("this lz4 build does not export LZ4_decompress_safe_partial")
    group = np.stack([row.frame[0] for row in play[40:44]])  # [4, 84, 84]
    data = np.frombuffer(codec.compress(group), np.uint8)
    out = np.full((3, 84, 84), 7, np.uint8)
    codec.decode_into([data.ctypes.data], [len(data)], [out.ctypes.data], [2 * 84 * 84])
    assert np.array_equal(out[:2], group[:2])
    assert (out[2] == 7).all()
    with pytest.raises(ValueError, match="corrupt lz4 group"):
        codec.decode_into([data.ctypes.data], [len(data) // 2], [out.ctypes.data],
                          [4 * 84 * 84])  # fmt: skip


def test_without_the_direct_path_lz4_samples_the_same_batches(play, monkeypatch):
    """Where the lz4 extension exports no decoder, decompress-and-copy takes over."""
    monkeypatch.setattr("qzoo.replay.codecs.lz4_decode_into", lambda block: None)
    plain = bench_storage(((84, 84), np.uint8, 4), 90, 2, 3, False, "none", seed=3)
    packed = bench_storage(((84, 84), np.uint8, 4), 90, 2, 3, False, "lz4", seed=3)
    assert packed.storage.frames.codec.decode_into is None
    for t, row in enumerate(play):
        plain.add(row), packed.add(row)
        if t >= 10 and t % 5 == 0:
            a, b = plain.sample(16), packed.sample(16)
            assert np.array_equal(a.s_tm1, b.s_tm1) and np.array_equal(a.s_t, b.s_t)


def test_the_next_batch_decoded_during_an_update_changes_nothing():
    """8 environments at 2 frames per update: 4 updates due after each step. Their
    batches 2..4 are drawn on a thread while the update before runs (replay/ahead.py);
    the rows are those of an uncompressed run, to the bit."""
    import threading

    from qzoo.configuration import build_config
    from qzoo.run.trainer import WALL_CLOCK_COLUMNS, Trainer

    def trainer(compression):
        return Trainer(build_config("dqn", {
            "env": "CartPole-v1", "iterations": "2", "train_frames": "400", "num_envs": "8",
            "eval_frames": "40", "replay_capacity": "800", "learn_period": "2",
            "min_replay_capacity_fraction": "0.2", "replay_compression": compression,
        }))  # fmt: skip

    def rows(trainer):
        return [{k: repr(v) for k, v in trainer.run_iteration().items()
                 if k not in WALL_CLOCK_COLUMNS} for _ in range(3)]  # fmt: skip

    compressed = trainer("lz4")
    threads = []
    sample = compressed.updates.sample_batch
    compressed.updates.sample_batch = lambda: (
        threads.append(threading.current_thread().name) or sample()
    )
    assert rows(compressed) == rows(trainer("none"))
    assert len(threads) > 100 and all(t.startswith("qzoo-sample") for t in threads)
