"""R2D1 on Ray (qzoo/distributed/recurrent.py, issue 14).

Fast (plain classes, no Ray instance): what a sequence shard stores is what the
recurrent actor produced, chunk after chunk, and each stored state is the one the
actor carried (the network unrolled over the stored rows from one stored state gives
the next); bad input. Slow (test_ray.py's local Ray instance): a short r2d1 run on
CartPole writes every results.csv row and resumes with the shards' sequences. No
learning check: on the shared 2-core machine (load 9-13) a run long enough to learn
reliably (CartPole, 6,000 frames: best returns 20-270 over three seeds) takes more
than a minute.
"""

import math

import numpy as np
import pytest
import torch

from qzoo import envs
from qzoo.cli.main import main
from qzoo.configuration import build_config
from qzoo.distributed import workers
from qzoo.distributed.recurrent import SequenceActorWorker, SequenceShard
from qzoo.distributed.workers import CHUNK_STEPS
from qzoo.replay.frames import FIRST, LAST
from qzoo.replay.sequences import stacked_observations
from qzoo.run import checkpoint

ray = pytest.importorskip("ray")
from test_ray import _one_error_line, _rows, local_ray  # noqa: F401  (the fixture)

INTERVAL = 20  # 50-row chunks do not line up with it: states of rows 0, 20, 40, 60, ...


def _config(**extra):
    options = {"env": "CartPole-v1", "ray": "true", "actors": "1", "envs_per_actor": "2",
               "replay_capacity": "1000", "store_state_interval": str(INTERVAL), "seed": "3",
               **extra}  # fmt: skip
    return build_config("r2d1", options)


@pytest.fixture(autouse=True)
def _outside_ray(monkeypatch):
    """Workers made here as plain objects, not Ray actors: not restarted by Ray."""
    monkeypatch.setattr(workers, "_was_restarted", lambda: False)


class _Recorder:
    """Wraps a worker's `keep` to record every row the actor produced (frames,
    actions, rewards, flags) with the state it acted from."""

    def __init__(self, worker):
        self.rows, keep = [], worker.keep
        worker.keep = lambda row: self.rows.append(row) or keep(row)


def _collect(worker, chunks):
    """Chunks from the worker as the trainer gets them (version -1: its own weights)."""
    return [worker.collect(-1, None)[0] for _ in range(chunks)]


def test_preset_num_envs_gives_way_to_envs_per_actor_on_ray():
    assert build_config("r2d1", {"env": "CartPole-v1"}).num_envs == 4
    config = _config()
    assert (config.num_envs, config.envs_per_actor, config.recurrent) == (1, 2, True)


def test_shard_stores_the_actors_rows_and_the_states_it_acted_from():
    config = _config()
    info = envs.describe(config)
    worker = SequenceActorWorker(config, info, 0, np.array([0.5, 0.5]))
    recorder = _Recorder(worker)
    chunks = _collect(worker, 3)
    assert [sent.row0 for _, sent in chunks] == [0, 50, 100]
    # States sent only at actor rows 0, 20, 40 | 60, 80 | 100, 120, 140.
    assert [len(sent.states) for _, sent in chunks] == [3, 2, 3]
    shard = SequenceShard(config, info, 0)
    for data in chunks:
        shard.add(0, data)
    storage = shard.replays[0].storage
    rows = recorder.rows
    assert storage.num_adds == len(rows) == 3 * CHUNK_STEPS and storage.num_rows >= len(rows)
    np.testing.assert_array_equal(storage.frames[:150], np.stack([r.frame for r in rows]))
    t, b = np.meshgrid(np.arange(150), np.arange(2), indexing="ij")  # the flags share the byte
    np.testing.assert_array_equal(storage.action_at(t, b), np.stack([r.action for r in rows]))
    np.testing.assert_array_equal(storage.rewards[:150], np.stack([r.reward for r in rows]))
    first = np.stack([r.first for r in rows])
    first[0] = True  # a fresh slot's first row starts what it holds (it does here anyway)
    np.testing.assert_array_equal((storage.flags[:150] & FIRST) != 0, first)
    np.testing.assert_array_equal((storage.flags[:150] & LAST) != 0, [r.last for r in rows])
    assert (storage.flags[:150] & LAST).any(), "no episode ended: the test would miss resets"
    for p, t in enumerate(range(0, 150, INTERVAL)):
        acted_from = rows[t].agent_info.state.numpy()
        np.testing.assert_array_equal(storage.states[p], acted_from)
        # Zero exactly where an episode starts: carried across chunks otherwise.
        assert ((np.abs(acted_from).sum((1, 2)) == 0) == first[t]).all(), t
    # The actor's Q-values ride along for the input priorities.
    newest = np.arange(150 - storage.length, 150)  # the ring of the newest S rows
    q_max = np.stack([rows[t].agent_info.q_max for t in newest])
    np.testing.assert_array_equal(storage.q_max[newest % storage.length], q_max)

    # Each stored state is the actor's carried one: the network unrolled over the
    # stored rows t..t+19 from the state stored at t gives the state stored at t + 20.
    network = worker.policy.network
    checked = 0
    for p, t in enumerate(range(0, 150 - INTERVAL, INTERVAL)):
        batch = storage.gather(np.full(2, t), np.arange(2))
        obs = stacked_observations(torch.as_tensor(batch.frames), torch.as_tensor(batch.frame_mask))
        state = torch.as_tensor(batch.state[..., 0, :]), torch.as_tensor(batch.state[..., 1, :])
        prev_a, prev_r = torch.as_tensor(batch.prev_action), torch.as_tensor(batch.prev_reward)
        with torch.no_grad():
            for j in range(INTERVAL):  # as the actor: zero state where an episode starts
                keep = torch.as_tensor(~first[t + j])[None, :, None].float()
                state = (state[0] * keep, state[1] * keep)
                state = network(obs[j : j + 1], prev_a[j : j + 1], prev_r[j : j + 1], state)[1]
        unrolled = torch.stack([state[0][0], state[1][0]], dim=1).numpy()
        for b in range(2):
            if not first[t + INTERVAL, b]:
                np.testing.assert_allclose(unrolled[b], storage.states[p + 1, b], atol=1e-5)
                checked += 1
    assert checked >= 8


def test_a_chunk_not_lined_up_with_the_slot_drops_rows_up_to_the_next_storage_point():
    """A fresh slot (a restarted shard) getting the actor's second chunk (rows 50..99):
    rows 50..59 are dropped, row 60 (whose state was sent) is the slot's row 0."""
    config = _config()
    info = envs.describe(config)
    worker = SequenceActorWorker(config, info, 0, np.array([0.5, 0.5]))
    recorder = _Recorder(worker)
    second = _collect(worker, 2)[1]
    shard = SequenceShard(config, info, 0)
    shard.add(0, second)
    storage = shard.replays[0].storage
    rows = recorder.rows
    assert storage.num_adds == 40
    np.testing.assert_array_equal(storage.frames[:40], np.stack([r.frame for r in rows[60:]]))
    assert ((storage.flags[0] & FIRST) != 0).all()  # starts what the slot holds
    np.testing.assert_array_equal(storage.states[0], rows[60].agent_info.state.numpy())
    np.testing.assert_array_equal(storage.states[1], rows[80].agent_info.state.numpy())


def test_sequence_shard_batches_join_slots_along_the_sequence_axis():
    config = _config(actors="2", replay_capacity="2000", prioritized="false")
    info = envs.describe(config)
    shard = SequenceShard(config, info, 0)
    for slot in range(2):
        worker = SequenceActorWorker(config, info, slot, np.array([0.5, 0.5]))
        for data in _collect(worker, 2):
            shard.add(slot, data)
    batch = shard.sample(64, 0.0)
    slot, p, b = batch.indices
    s = config.burn_in_steps + config.sequence_steps + config.n_steps
    assert batch.frames.shape[:2] == (s, 64) and batch.state.shape == (1, 64, 2, 64)
    assert batch.zero_state.shape == (64,) and set(slot.tolist()) == {0, 1}
    # Each sequence is its slot's: the stored state at its storage point.
    for i in range(64):
        stored = shard.replays[slot[i]].storage.states[p[i], b[i]]
        np.testing.assert_array_equal(batch.state[0, i], stored)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--actors", "2", "--replay-capacity", "80", "--min-replay-capacity-fraction", "0.5"],
         ("(--replay-capacity 80 / --actors 2 / --envs-per-actor 1, in multiples of "
          "--store-state-interval: 40)")),
        (["--num-envs", "4"], "use --envs-per-actor"),
    ],
)  # fmt: skip
def test_bad_r2d1_ray_input_is_one_line_exit_2(argv, fragment, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "r2d1", "--env", "CartPole-v1", "--ray", *argv,
                 "--run-dir", str(run_dir)]) == 2  # fmt: skip
    _one_error_line(capsys.readouterr().err, fragment)
    assert not run_dir.exists()


@pytest.mark.slow
@pytest.mark.usefixtures("local_ray")
def test_r2d1_ray_run_writes_every_row_and_resumes(tmp_path, capsys):
    """About 35 s: 2 actors x 2 environments, 2 shards of sequences, 1 iteration of
    2,000 frames, then a resume for a second."""
    run_dir = tmp_path / "run"
    argv = ["train", "r2d1", "--env", "CartPole-v1", "--ray", "--actors", "2",
            "--envs-per-actor", "2", "--replay-shards", "2", "--replay-capacity", "4000",
            "--iterations", "1", "--train-frames", "2000", "--eval-frames", "200",
            "--run-dir", str(run_dir), "--no-progress"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    rows = _rows(run_dir)
    assert [row["iteration"] for row in rows] == ["0", "1"]
    for row in rows:
        assert all(value != "" for value in row.values()), row
        assert math.isfinite(float(row["eval_episode_return"]))
    for row in rows[1:]:
        assert int(row["train_num_updates"]) > 0 and math.isfinite(float(row["train_loss"]))
    assert float(rows[-1]["max_seen_priority"]) > 0

    def stored():
        state = checkpoint.load(str(run_dir / "checkpoints" / "latest.safetensors"))
        slots = [slot["storage"] for shard in state["trainer"]["replay"] for slot in shard["slots"]]
        return sum(int(s["num_adds"]) for s in slots), slots

    before, slots = stored()
    assert len(slots) == 2 and before >= 500  # rows of 2 environments: 2,000+ frames
    # The checkpoint holds each slot's recurrent states (nonzero: carried states).
    assert all(np.abs(np.asarray(s["states"])).sum() > 0 for s in slots)
    argv[argv.index("--iterations") + 1] = "2"
    assert main(argv + ["--accept-changes", "iterations"]) == 0
    assert "resuming" in capsys.readouterr().err
    rows = _rows(run_dir)
    assert [row["iteration"] for row in rows] == ["0", "1", "2"]
    assert int(rows[2]["train_num_updates"]) > 0 and stored()[0] > before
