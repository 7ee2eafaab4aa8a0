"""Offline training on Ray (qzoo/distributed/dataset_shards.py, offline.py; issue 14), on
a tiny dataset of MinAtar-shaped frames written here (frame k filled with k).

Fast (no Ray): bad input; the split of checkpoints or rows across shards is disjoint
and covers the dataset; a shard's transitions and batches are the local
DatasetStorage's.
Slow (the local Ray instance of test_ray.py; budget 180 s: 154 s together in the suite
beside another worker and an Atari run, most of it Ray starting processes): batches
through Ray equal the local storage's at the same indices and come from the shards in
proportion to their transitions (and from one checkpoint each with --offline-reload);
a run with a shard killed mid-run (Ray restarts it) completes with every row and
resumes.
"""

import numpy as np
import pytest
from helpers import episodes
from test_ray import _one_error_line, _rows, kill_when_results, local_ray  # noqa: F401

from qzoo import envs
from qzoo.cli.main import main
from qzoo.configuration import build_config
from qzoo.distributed.dataset_shards import DatasetShard, data_rows, split
from qzoo.offline.dataset import dataset_checkpoints, open_dataset
from qzoo.offline.writer import LoggedReplayWriter

ray = pytest.importorskip("ray")

LENGTHS = [37, 80, 12, 55, 140, 23, 90, 61, 44, 75, 30, 100, 17, 66] * 2


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Six checkpoints of 300 rows (five full, one partial) of (4, 10, 10) frames, as
    minatar/breakout gives, converted to qzoo's layout (as the learner does once)."""
    folder = tmp_path_factory.mktemp("dataset")
    writer = LoggedReplayWriter(folder / "replay_logs", 300, (4, 10, 10))
    episodes(writer, LENGTHS)
    writer.close()
    return str(folder)


def _config(dataset, **options):
    options = {"env": "minatar/breakout", "offline": dataset, "learn_period": "8",
               "batch_size": "32", "eval_frames": "100", "train_frames": "200",
               **{k: str(v) for k, v in options.items()}}  # fmt: skip
    return build_config("dqn", options)


def _local(config, suffixes):
    """The local run's storage over `suffixes`, and each suffix's column in it."""
    storage = open_dataset(config.offline, envs.describe(config), config.frame_stack,
                           config.n_steps, config.discount, suffixes)  # fmt: skip
    return storage, {s: j for j, s in enumerate(storage.suffixes)}


def _same_as_local(batch, storage, column):
    """Asserts that `batch` (indices: suffix, row) holds the local storage's transitions."""
    suffix, t = batch.indices
    b = np.array([column[s] for s in suffix.tolist()])
    assert storage.valid(t, b).all()
    local = storage.gather(t, b)
    for name in ("s_tm1", "a_tm1", "r_t", "discount_t", "s_t"):
        np.testing.assert_array_equal(getattr(batch, name), getattr(local, name), err_msg=name)


FULL = dict.fromkeys(range(6), 300)


@pytest.mark.parametrize(
    "sizes, shards",
    [(FULL, 2), (FULL, 4), (FULL, 6), ({0: 300, 1: 300, 2: 5}, 2), ({1: 300, 5: 244}, 3),
     ({0: 300}, 4), ({0: 10, 1: 10, 2: 10}, 7), ({7: 5, 40: 5, 3: 5}, 2)],
)  # fmt: skip
def test_split_is_disjoint_and_covers_every_row_holding_data(sizes, shards):
    parts = split(sizes, shards)
    assert len(parts) == shards and all(parts)  # no shard left empty
    owned = [(s, t) for mine in parts for s, lo, hi in mine for t in range(lo, hi)]
    assert sorted(owned) == sorted((s, t) for s, rows in sizes.items() for t in range(rows))
    loads = [sum(hi - lo for _, lo, hi in mine) for mine in parts]
    if len(sizes) >= shards:  # whole checkpoints, balanced by rows
        assert all(lo == 0 and hi == sizes[s] for mine in parts for s, lo, hi in mine)
        assert max(loads) - min(loads) <= max(sizes.values())
    else:  # runs of rows of (almost) equal length
        assert max(loads) - min(loads) <= 1
    if sizes == {0: 300, 1: 300, 2: 5}:  # the small final checkpoint beside a big one
        assert parts == [[(0, 0, 300), (2, 0, 5)], [(1, 0, 300)]]


@pytest.mark.parametrize("suffixes, shards", [([0, 1, 2, 3, 4, 5], 4), ([1, 5], 3)])
def test_shards_hold_and_draw_exactly_the_local_storages_transitions(dataset, suffixes, shards):
    config = _config(dataset)
    info = envs.describe(config)
    storage, column = _local(config, suffixes)
    found = dataset_checkpoints(dataset, info, suffixes)
    parts = split({s: data_rows(c) for s, c in found.items()}, shards)
    total = 0
    for k, mine in enumerate(parts):
        shard = DatasetShard(config, info, k)
        counts, _ = shard.counts(mine)
        total += sum(counts)
        # Every valid transition of the shard's rows, by the local storage's rules.
        expected = {(s, t) for s, lo, hi in mine for t in range(lo, hi)
                    if storage.valid(np.array([t]), np.array([column[s]]))[0]}  # fmt: skip
        assert sum(counts) == len(expected)
        seen = set()
        for _ in range(150):
            batch, _ = shard.sample(64, mine)
            _same_as_local(batch, storage, column)
            seen.update(zip(*(x.tolist() for x in batch.indices)))
        assert seen == expected  # only its own, and (over 9,600 draws) every one
        # --offline-reload's draw from one checkpoint only.
        one = mine[0][0]
        batch, _ = shard.sample(64, mine, one)
        assert set(batch.indices[0].tolist()) == {one}
    assert total == storage.valid_count()  # the shards' sizes add up to the dataset's


@pytest.mark.parametrize(
    "extra, fragment",
    [(["--actors", "2"], ("--actors: bad value 2; expected 1 with --offline: an offline "
                          "run on Ray has no training actors")),
     (["--envs-per-actor", "3"], "--envs-per-actor: bad value 3; expected 1 with --offline"),
     (["--prioritized"], "--prioritized: bad value true; expected --prioritized false with --offline"),
     (["--publish-period", "10"], "--publish-period: bad value 10; expected 0 with --offline"),
     (["--replay-ratio-tolerance", "0.1"],
      "--replay-ratio-tolerance: bad value 0.1; expected 0.05 (the default) with --offline")],
)  # fmt: skip
def test_offline_ray_bad_input_is_one_line(extra, fragment, tmp_path, capsys):
    argv = ["train", "dqn", "--env", "minatar/breakout", "--offline", str(tmp_path), "--ray"]
    run_dir = tmp_path / "run"
    assert main(argv + extra + ["--run-dir", str(run_dir)]) == 2
    _one_error_line(capsys.readouterr().err, fragment)
    assert not run_dir.exists() and not ray.is_initialized()


@pytest.mark.slow
@pytest.mark.usefixtures("local_ray")
def test_batches_through_ray_are_the_local_storages(dataset):
    """About 15 s: 2 checkpoints over 3 shards (row ranges), then --offline-reload 1."""
    from qzoo.run.trainer import Trainer

    config = _config(dataset, ray="true", replay_shards=3, offline_checkpoints="1:3")
    storage, column = _local(config, [1, 2])
    trainer = Trainer(config)
    try:
        data = trainer.replay
        assert data.size == storage.valid_count()
        per_shard = data.valid.sum(axis=1)
        assert (per_shard > 0).all()
        shard_of = {(s, t): k for k, mine in enumerate(data.parts)
                    for s, lo, hi in mine for t in range(lo, hi)}  # fmt: skip
        drawn = np.zeros(3)
        for _ in range(400):
            batch = data.sample(32)
            _same_as_local(batch, storage, column)
            owners = {shard_of[i] for i in zip(*(x.tolist() for x in batch.indices))}
            assert len(owners) == 1  # a batch comes whole from one shard
            drawn[owners.pop()] += 1
        # Shards are picked in proportion to their transitions (binomial sd < 0.025).
        np.testing.assert_allclose(drawn / 400, per_shard / per_shard.sum(), atol=0.1)
    finally:
        trainer.finish()
    # --offline-reload 1: one checkpoint, split in row ranges over 2 shards.
    config = _config(dataset, ray="true", replay_shards=2, offline_reload=1)
    trainer = Trainer(config)
    try:
        assert [len(p) for p in trainer.replay.parts] == [1, 1]
        # Each training iteration draws its checkpoint and opens a new dataset; the wait
        # is that dataset's alone (it was once the difference across two datasets).
        rows = [trainer.run_iteration() for _ in range(3)]
        assert all(0 <= row["learner_wait_fraction"] <= 1 for row in rows[1:]), rows
        (suffix,) = trainer.replay.suffixes
        storage, column = _local(config, [suffix])
        for _ in range(20):
            batch = trainer.replay.sample(32)
            _same_as_local(batch, storage, column)
    finally:
        trainer.finish()


LOCAL_COLUMNS = [
    "iteration", "frame", "eval_episode_return", "train_episode_return", "eval_num_episodes",
    "train_num_episodes", "eval_frame_rate", "train_frame_rate", "train_exploration_epsilon",
    "train_state_value", "normalized_return", "capped_normalized_return", "human_gap",
    "train_loss", "train_mean_q", "train_num_updates", "train_steps_per_second",
    "train_updates_per_second", "replay_ratio", "learner_wait_fraction", "wall_time",
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.usefixtures("local_ray")
def test_an_offline_ray_run_survives_a_killed_shard_writes_every_row_and_resumes(
    dataset, tmp_path, capsys
):
    """About 30 s alone: 2 shards, 3 iterations of 500 updates; shard 1 killed (ray.kill,
    restart allowed) once iteration 0's row is written, the learner asks its lost
    requests again of the new process; then one more iteration on resume. (One run
    for both: most of an offline run on Ray is its shard processes starting.)"""
    run_dir = tmp_path / "run"
    argv = ["train", "dqn", "--env", "minatar/breakout", "--offline", dataset, "--ray",
            "--replay-shards", "2", "--iterations", "3", "--train-frames", "4000",
            "--eval-frames", "100", "--learn-period", "8", "--run-dir", str(run_dir),
            "--no-progress"]  # fmt: skip
    finish, killed = kill_when_results(run_dir, "qzoo-shard-1-", poll=0.05)
    assert main(argv) == 0, capsys.readouterr().err
    finish()
    err = capsys.readouterr().err
    assert killed, "the run ended before a shard could be killed"
    assert "qzoo: ray: replay shard 1 restarted by Ray" in err, err
    rows = _rows(run_dir)
    assert list(rows[0]) == LOCAL_COLUMNS + [
        "learner_update_rate", "replay_sample_rate", "replay_shard_restarts",
    ]  # fmt: skip
    assert [r["iteration"] for r in rows] == ["0", "1", "2", "3"]
    assert [r["train_num_updates"] for r in rows] == ["0", "500", "500", "500"]
    assert int(rows[-1]["replay_shard_restarts"]) >= 1
    for row in rows[1:]:
        assert np.isfinite(float(row["train_loss"])) and int(row["eval_num_episodes"]) > 0
        assert row["train_num_episodes"] == "0" and row["train_exploration_epsilon"] == "nan"
        assert float(row["replay_sample_rate"]) == pytest.approx(
            32 * float(row["learner_update_rate"])
        )
        assert 0 <= float(row["learner_wait_fraction"]) <= 1
    argv[argv.index("--iterations") + 1] = "4"
    assert main(argv + ["--accept-changes", "iterations"]) == 0
    assert "resuming" in capsys.readouterr().err
    rows = _rows(run_dir)
    assert [r["iteration"] for r in rows] == ["0", "1", "2", "3", "4"]
    assert rows[4]["frame"] == "16000" and rows[4]["train_num_updates"] == "500"
