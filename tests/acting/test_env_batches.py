"""ale-py's asynchronous mode (--env-batch-size, issue 13): every stored row is a real
step of its own environment, checked against a fresh synchronous environment with the
same seed; per-environment stacks, epsilons and episodes follow the ids; a batch of
all environments gives the synchronous rows; bad input is one line."""

import types

import numpy as np
import pytest
import torch

from qzoo import envs
from qzoo.acting.actor import Actor
from qzoo.acting.batches import BatchActor, ColumnQueues
from qzoo.acting.from_config import acting_of
from qzoo.acting.policy import Policy
from qzoo.cli.main import main
from qzoo.configuration import make_config
from qzoo.envs.atari import AtariVector
from qzoo.envs.atari_batches import AtariBatches, make_batches
from qzoo.replay.frames import FIRST, LAST, ZERO_DISCOUNT, FrameStorage
from qzoo.run.trainer import Trainer
from qzoo.streams import Streams

CAP = 400  # frames: episodes of at most 100 agent steps, so the cap is reached


def breakout(**options):
    """Breakout: lives to lose. Small schedules so a Trainer can run."""
    values = {"num_envs": 4, "env_batch_size": 2, "max_frames_per_episode": CAP,
              "iterations": 1, "train_frames": 2000, "eval_frames": 200,
              "replay_capacity": 4000, "min_replay_capacity_fraction": 0.1, "learn_period": 16,
              **options}  # fmt: skip
    return make_config("dqn", "breakout", "atari", values)


class _Flat(torch.nn.Module):
    """Q = 0 everywhere: with epsilon 1 the policy acts uniformly at random."""

    kind = "plain"

    def __init__(self, num_actions):
        super().__init__()
        self.num_actions = num_actions
        self.unused = torch.nn.Parameter(torch.zeros(1))

    def forward(self, obs, taus=None, generator=None):
        return types.SimpleNamespace(q_values=torch.zeros(len(obs), self.num_actions))


class _Recording(Policy):
    """A Policy that keeps what it was asked: observations and epsilons per call."""

    def __init__(self, network):
        super().__init__(network, 1)
        self.calls = []

    def __call__(self, observation, epsilon, generator):
        self.calls.append((observation.copy(), np.array(epsilon)))
        return super().__call__(observation, epsilon, generator)


class _Seeded(AtariBatches):
    """AtariBatches that remembers the seed of its reset."""

    def reset(self, seed):
        self.seed = seed
        return super().reset(seed)


def _act(config, steps, epsilons):
    """Runs a BatchActor for `steps` batches; returns the actor, its rows, the ids of
    every batch, the policy's calls and the reset seed."""
    info = envs.describe(config)
    made = []

    def make_env(n, eval_mode=False):
        made.append(_Seeded(config.env, n, config.env_batch_size, config))
        return made[-1]

    policy = _Recording(_Flat(info.num_actions))
    actor = BatchActor(acting_of(config), info, policy, Streams(7, "cpu").actor,
                       lambda _: epsilons, make_env=make_env)  # fmt: skip
    actor.start()
    rows, ids = [], []
    for _ in range(steps):
        ids.append(actor._ids.copy())
        new_rows, _ = actor.step()
        rows += new_rows
    stats = actor.stop()
    return types.SimpleNamespace(actor=actor, rows=rows, ids=ids, calls=policy.calls,
                                 seed=made[0].seed, stats=stats, info=info)  # fmt: skip


@pytest.fixture(scope="module")
def acted():
    config = breakout()
    return config, _act(config, 700, np.array([1.0, 1.0, 1.0, 1.0], np.float32))


def _storage(config, rows):
    """A FrameStorage (stack 4, 1-step) holding exactly `rows`."""
    storage = FrameStorage(len(rows) * config.num_envs, config.num_envs, (84, 84), np.uint8,
                           4, 4, 1, 0.99)  # fmt: skip
    for row in rows:
        storage.add(row)
    return storage


def _flags(row):
    return (row.first * FIRST) | (row.last * LAST) | (row.zero_discount * ZERO_DISCOUNT)


def test_every_row_is_a_real_step_of_its_own_environment(acted):
    config, run = acted
    # 700 batches of 2 of 4 environments: ~350 steps each, and a row once all four have
    # one; ale-py's threads decide which two step, so a lagging one costs rows (bounded
    # far below, for a loaded machine: the check is each row, not their number).
    assert len(run.rows) > 100
    for b in range(config.num_envs):
        # batch_size 1: ale-py's no-op draw as in asynchronous mode (none drawn again)
        reference = AtariVector("breakout", 1, config, batch_size=1)
        step = reference.reset(run.seed + b)  # ale-py seeds environment i with seed + i
        for t, row in enumerate(run.rows):
            assert np.array_equal(row.frame[b], step.frame[0]), (b, t)
            assert row.reward[b] == np.clip(step.reward[0], -1, 1), (b, t)
            assert (row.first[b], row.last[b]) == (step.first[0], step.last[0]), (b, t)
            assert row.zero_discount[b] == step.terminated[0] | step.life_loss[0], (b, t)
            step = reference.step(np.array([row.action[b]]))
        reference.close()


def test_protocol_holds_per_environment(acted):
    """Life losses zero the discount mid-episode, episodes stop at the frame cap, and
    every episode's end is followed by its environment's next first observation."""
    config, run = acted
    flags = np.stack([_flags(row) for row in run.rows])  # [T, N]
    mid_episode_losses = (flags & ZERO_DISCOUNT != 0) & (flags & LAST == 0)
    truncations = (flags & LAST != 0) & (flags & ZERO_DISCOUNT == 0)
    assert mid_episode_losses.any() and truncations.any()
    for b in range(config.num_envs):
        starts = np.flatnonzero(flags[:, b] & FIRST)
        ends = np.flatnonzero(flags[:, b] & LAST)
        assert starts[0] == 0 and len(ends) >= 2
        for end in ends[ends + 1 < len(flags)]:
            assert flags[end + 1, b] & FIRST  # next-step autoreset, in the same column
        lengths = ends - starts[: len(ends)]
        assert lengths.max() <= CAP // config.action_repeats  # no-op frames count too


def test_replay_stores_no_transition_across_an_autoreset(acted):
    config, run = acted
    storage = _storage(config, run.rows)
    t = np.repeat(np.arange(len(run.rows) - 1), config.num_envs)
    b = np.tile(np.arange(config.num_envs), len(run.rows) - 1)
    valid = storage.valid(t, b)
    last = storage.flags[t, b] & LAST != 0
    next_first = storage.flags[t + 1, b] & FIRST != 0
    assert np.array_equal(valid, ~last & ~next_first)
    assert last.sum() >= 2 * config.num_envs  # several resets crossed in each column


def test_stacks_and_epsilons_follow_the_environment_ids():
    config = breakout(max_frames_per_episode=200)
    epsilons = np.array([0.1, 0.4, 0.7, 1.0], np.float32)
    run = _act(config, 300, epsilons)
    storage = _storage(config, run.rows)
    acted_on = np.zeros(config.num_envs, int)  # observations each environment acted on
    for ids, (observations, epsilon) in zip(run.ids, run.calls, strict=True):
        assert np.array_equal(epsilon, epsilons[ids])
        for i, obs in zip(ids, observations, strict=True):
            t = acted_on[i]
            if t < len(run.rows):  # the same stack replay assembles for that row
                assert np.array_equal(obs, storage.stacked(np.array([t]), np.array([i]))[0])
            acted_on[i] += 1
    assert sorted(set(np.concatenate(run.ids).tolist())) == [0, 1, 2, 3]
    # Each environment acted once per row stored, plus what still waits in its queue.
    assert (acted_on - len(run.rows)).min() == 0


def test_a_batch_of_all_environments_gives_the_synchronous_rows():
    config = breakout(num_envs=3, env_batch_size=3)
    info = envs.describe(config)
    rows = {}

    def synchronous(n, eval_mode=False):  # ale-py's no-op draws, none redrawn
        return AtariVector("breakout", n, config, batch_size=n)

    def batches(n, eval_mode=False):
        return make_batches(config, n, config.seed, eval_mode)

    for actor_class in (Actor, BatchActor):
        make_env = batches if actor_class is BatchActor else synchronous
        policy = Policy(_Flat(info.num_actions), 1)
        actor = actor_class(acting_of(config), info, policy, Streams(3, "cpu").actor,
                            lambda _: 0.5, make_env=make_env)  # fmt: skip
        actor.start()
        steps = [actor.step() for _ in range(150)]
        stats = actor.stop()
        # Actor returns a Row per step, BatchActor a list of the rows completed.
        flat = [row if isinstance(row, list) else [row] for row, _ in steps]
        rows[actor_class] = [r for some in flat for r in some]
        rows[actor_class, "stats"] = (stats["num_episodes"], stats["episode_return"],
                                      [frames for _, frames in steps])  # fmt: skip
    assert len(rows[Actor]) == len(rows[BatchActor]) == 150
    for a, b in zip(rows[Actor], rows[BatchActor], strict=True):
        for x, y in zip(a[:6], b[:6], strict=True):
            assert np.array_equal(x, y)
    assert rows[Actor, "stats"] == rows[BatchActor, "stats"]


def test_training_counts_real_frames_and_updates():
    # Learning starts at 80 stored transitions of the 250 collected: rows wait in queues
    # until every environment has one, and with ale-py's threads one environment can lag
    # by tens of steps (CI once stored fewer than 200 by the phase's end).
    config = breakout(max_frames_per_episode=108_000, train_frames=1000, learn_period=64,
                      replay_capacity=2000, min_replay_capacity_fraction=0.04)  # fmt: skip
    trainer = Trainer(config)
    trainer.run_iteration()
    row = trainer.run_iteration()
    # A phase stops at the first batch that reaches its budget: one batch at most over.
    assert 1000 <= trainer.frame_t < 1000 + config.env_batch_size * config.action_repeats
    assert trainer.updates.transitions_collected * config.action_repeats == trainer.frame_t
    # Every acted-on observation is an entry: stored (in rows of N) or still queued when
    # the phase stopped. Each environment step collected had one; so did each episode
    # start after an autoreset (not collected) and the phase's first observations.
    queued = int(trainer.actor._columns._lengths.sum())
    entries = trainer.replay.size + queued
    assert trainer.replay.size % config.num_envs == 0 and trainer.replay.size > 0
    collected = trainer.updates.transitions_collected
    assert collected <= entries <= collected + row["train_num_episodes"] + config.num_envs
    assert trainer.updates.transitions_sampled > 0
    assert (
        row["replay_ratio"]
        == trainer.updates.transitions_sampled / trainer.updates.transitions_collected
    )


@pytest.mark.parametrize("start", ["fork", "forkserver"])
def test_an_actor_process_acts_on_the_ready_environments(start, monkeypatch):
    """--acting async --actor-process with --env-batch-size: the actor process acts on
    batches (forked, and from the forkserver as beside a GPU learner); a step that
    completes no row still counts its frames, so the counts are those of serial
    batches, and the replay holds whole rows."""
    import multiprocessing

    from qzoo.acting import process

    if start == "forkserver":
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([process.__name__])
        monkeypatch.setattr(process, "start_context", lambda device: ctx)
    config = breakout(acting="async", actor_process=True, max_frames_per_episode=108_000,
                      train_frames=1000, learn_period=64, replay_capacity=2000,
                      min_replay_capacity_fraction=0.04)  # fmt: skip
    trainer = Trainer(config)
    assert isinstance(trainer.driver.actor, BatchActor)
    trainer.run_iteration()
    row = trainer.run_iteration()
    assert 1000 <= trainer.frame_t < 1000 + config.env_batch_size * config.action_repeats
    assert trainer.updates.transitions_collected * config.action_repeats == trainer.frame_t
    assert trainer.replay.size % config.num_envs == 0 and trainer.replay.size > 0
    assert trainer.updates.transitions_sampled > 0 and row["train_num_updates"] > 0
    assert multiprocessing.active_children() == []


def test_column_queues_release_rows_when_every_environment_has_one():
    queues = ColumnQueues(3)
    frame = np.arange(2)[:, None]

    def add(ids, action):
        ids = np.array(ids)
        no = np.zeros(len(ids), bool)
        return queues.add(ids, frame, np.array(action), np.zeros(2, np.float32), no, no, no)

    assert add([0, 1], [10, 11]) == [] and add([0, 1], [20, 21]) == []
    assert queues.lag == 2
    (row,) = add([2, 0], [12, 30])  # environment 2's first entry completes row 0
    assert row.action.tolist() == [10, 11, 12]
    assert row.frame[:, 0].tolist() == [0, 1, 0]
    (row,) = add([1, 2], [31, 22])
    assert row.action.tolist() == [20, 21, 22]
    assert queues.lag == 1  # environments 0 and 1 have their third entry queued


def test_atari_batches_takes_one_action_per_environment_of_the_batch():
    env = AtariBatches("pong", 4, 2, breakout())
    step, ids = env.reset(3)
    assert step.first.all() and len(ids) == 2
    with pytest.raises(ValueError, match="3 actions for a batch of 2"):
        env.step(np.zeros(3, np.int64))
    env.close()
    with pytest.raises(ValueError, match="batch_size 5 not in 1..num_envs 4"):
        AtariBatches("pong", 4, 5, breakout())


BAD = [
    (["--env", "CartPole-v1", "--num-envs", "4", "--env-batch-size", "2"],
     ("--env-batch-size: bad value 2; expected 0 (all environments together) with gym "
      "environments")),
    (["--num-envs", "4", "--env-batch-size", "8"],
     "--env-batch-size: bad value 8; expected at most --num-envs 4"),
    (["--env-batch-size", "-1"], "--env-batch-size: bad value -1; expected an integer in"),
    (["--num-envs", "4", "--env-batch-size", "2", "--acting", "async"],
     ("--env-batch-size: bad value 2; expected 0 (all environments together) with --acting "
      "async")),
    (["--num-envs", "4", "--env-batch-size", "2", "--max-decorrelation-steps", "10"],
     "with --max-decorrelation-steps"),
    (["--num-envs", "4", "--env-batch-size", "2", "--recurrent"], "with --recurrent"),
    (["--num-envs", "4", "--env-batch-size", "2", "--num-heads", "2",
      "--deep-exploration"], "with --deep-exploration"),
]  # fmt: skip


@pytest.mark.parametrize("argv, fragment", BAD)
def test_bad_batch_input_is_one_line_exit_2(argv, fragment, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "dqn", *argv, "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("qzoo: note:")]
    assert len(lines) == 1 and lines[0].startswith("qzoo: error: ") and fragment in lines[0], err
    assert not run_dir.exists()
