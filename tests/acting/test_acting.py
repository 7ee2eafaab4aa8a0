"""rlpyt's sampling options (issue 11): the replay ratio, per-environment epsilons and
decorrelated starts, soft target updates, and the acting drivers (serial, parallel,
alternating, async), checked by hand, against serial, and against CartPole's own
dynamics (every stored transition must be one the environment can make)."""

import os
import threading
import types

import gymnasium
import numpy as np
import pytest
import torch
from helpers import TINY

from qzoo.acting import pinning
from qzoo.acting.actor import Actor
from qzoo.acting.exploration import decorrelate, final_epsilons, training_epsilon
from qzoo.acting.from_config import acting_of, in_process
from qzoo.acting.policy import Policy
from qzoo.acting.ratio import RatioGate, UpdateSchedule, updates_per_frame
from qzoo.acting.schedule import LinearSchedule
from qzoo.cli.main import main
from qzoo.configuration import make_config
from qzoo.envs import EnvStep, first_step
from qzoo.learning.from_config import make_learner
from qzoo.run import checkpoint
from qzoo.run.trainer import WALL_CLOCK_COLUMNS, Trainer
from qzoo.streams import Streams

SMALL = {**TINY, "num_envs": 4}


def cartpole(**options):
    """`None` removes an option of SMALL."""
    options = {k: v for k, v in {**SMALL, **options}.items() if v is not None}
    return make_config("dqn", "CartPole-v1", "gym", options)


def run(config, iterations=3):
    trainer = Trainer(config)
    rows = [trainer.run_iteration() for _ in range(iterations)]
    return trainer, [comparable(r) for r in rows]


def comparable(row):
    """The row without wall-clock columns, values as repr (NaN equals NaN)."""
    return {k: repr(v) for k, v in row.items() if k not in WALL_CLOCK_COLUMNS}


def assert_cartpole_transitions(replay, n=256):
    """Each sampled (s_tm1, a_tm1, s_t) is one step of CartPole's dynamics."""
    env = gymnasium.make("CartPole-v1").unwrapped
    env.reset(seed=0)
    batch = replay.sample(n)
    for s_tm1, a_tm1, s_t in zip(batch.s_tm1, batch.a_tm1, batch.s_t, strict=True):
        env.state, env.steps_beyond_terminated = s_tm1.astype(np.float64), None
        expected = env.step(int(a_tm1))[0]
        np.testing.assert_allclose(s_t, expected, rtol=1e-5, atol=1e-5)


# ---- the replay ratio ------------------------------------------------------------


def test_replay_ratio_and_learn_period_are_one_rule():
    # DQN Zoo: batch 32, 4 frames per step, one update every 16 frames = rlpyt's R 8.
    zoo = make_config("dqn", "pong", "atari", {})
    rlpyt = make_config("dqn", "pong", "atari", {"replay_ratio": 8.0})
    assert updates_per_frame(zoo) == updates_per_frame(rlpyt) == 1 / 16
    a, b = (UpdateSchedule(updates_per_frame(c), 40_000) for c in (zoo, rlpyt))
    assert [a.updates_due(f, f + 4) for f in range(0, 64, 4)] == [0, 0, 0, 1] * 4
    assert all(a.updates_due(f, f + 4) == b.updates_due(f, f + 4) for f in range(0, 10**4, 4))
    # R 3 with batch 32 and one frame per step: 3/32 of an update per frame, exactly:
    # 3 updates every 32 frames, due at frames 11, 22 and 32 (floor(f x 3 / 32) rises).
    config = make_config("dqn", "CartPole-v1", "gym", {"replay_ratio": 3.0, "batch_size": 32})
    schedule = UpdateSchedule(updates_per_frame(config), 100)
    due = [schedule.updates_due(f, f + 1) for f in range(64)]
    assert [f + 1 for f, d in enumerate(due) if d] == [11, 22, 32, 43, 54, 64]
    # The target: every 100 frames, or every 100 x 3/32 = 9.375 -> 9 updates.
    assert schedule.target_period_updates == 9
    assert [u for u in range(1, 30) if schedule.target_due_after(u - 1, u)] == [9, 18, 27]


def test_replay_ratio_logged_is_transitions_sampled_per_transition_collected():
    trainer = Trainer(cartpole(replay_ratio=4.0, learn_period=None, iterations=1))
    learning_from = []  # the frame count before the first step that learned
    learn = trainer.updates.learn_due
    trainer.updates.learn_due = lambda old, new: (learning_from or learning_from.extend(
        [old] if trainer.updates.can_learn() else []), learn(old, new))  # fmt: skip
    rows = [trainer.run_iteration() for _ in range(2)]
    # CartPole: batch 64, one frame per step; R 4 = one update per 64 / 4 = 16 frames
    # once the replay can learn (rlpyt's CumReplayRatio counts the warm-up too).
    collected, updates = trainer.updates.transitions_collected, rows[1]["train_num_updates"]
    assert collected == trainer.frame_t  # one transition per frame here
    assert updates == collected // 16 - learning_from[0] // 16
    assert trainer.updates.transitions_sampled == 64 * updates
    assert rows[1]["replay_ratio"] == 64 * updates / collected
    assert rows[0]["replay_ratio"] != rows[0]["replay_ratio"]  # NaN before any acting


# ---- per-environment epsilons and decorrelated starts ---------------------------


def test_per_environment_final_epsilons():
    four = final_epsilons(cartpole(eps_final_min=0.0005, exploration_epsilon_end_value=0.1))
    np.testing.assert_allclose(four, [0.0005, 0.0029240, 0.0170998, 0.1], rtol=1e-4)  # rlpyt
    apex = final_epsilons(cartpole(apex_epsilon=0.4, apex_alpha=7.0))
    np.testing.assert_allclose(apex, 0.4 ** (1 + 7 * np.arange(4) / 3))
    assert final_epsilons(cartpole()) is None
    # Each environment decays from the begin value to its own final.
    config = cartpole(eps_final_min=0.0005, exploration_epsilon_end_value=0.1)
    schedule = training_epsilon(config, LinearSchedule(100, 1000, 1.0, 0.1))
    np.testing.assert_allclose(schedule(0), 1.0)
    np.testing.assert_allclose(schedule(600), 0.5 + 0.5 * four)
    np.testing.assert_allclose(schedule(10**6), four)


class _PrefersAction0(torch.nn.Module):
    """Q = (1, 0) for every observation: greedy is always action 0."""

    kind = "plain"

    def __init__(self):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))

    def forward(self, obs, taus=None, generator=None):
        q = torch.tensor([[1.0, 0.0]]).expand(len(obs), 2)
        return types.SimpleNamespace(q_values=q)


def test_each_environment_explores_with_its_own_epsilon():
    config = cartpole(num_envs=3)
    info = Trainer(config).info
    epsilons = np.array([0.0, 0.5, 1.0])
    actor = Actor(acting_of(config), info, Policy(_PrefersAction0(), 1), Streams(3, "cpu").actor,
                  lambda _: epsilons, in_process(config))  # fmt: skip
    actor.start()
    actions = np.array([actor.step()[0].action for _ in range(400)])
    actor.stop()
    # Action 1 only when exploring picks it: with probability epsilon / 2.
    ones = actions.mean(axis=0)
    assert ones[0] == 0.0
    assert abs(ones[1] - 0.25) < 0.08 and abs(ones[2] - 0.5) < 0.08  # 3.7 sigma


class _Recorder:
    """A vector environment that records the actions it is given."""

    num_envs = 3

    def __init__(self):
        self.actions, self.t = [], 0

    def step(self, actions):
        self.actions.append(np.array(actions))
        self.t += 1
        no = np.zeros(3, bool)
        return EnvStep(np.full((3, 1), self.t, np.float32), np.ones(3, np.float32),
                       no, no, no, no, 3)  # fmt: skip


def test_decorrelated_start_takes_one_plus_u_max_random_actions_per_environment():
    env, rng = _Recorder(), np.random.default_rng(5)
    counts = 1 + np.floor(np.random.default_rng(5).random(3) * 50).astype(int)
    step = decorrelate(env, first_step(np.zeros((3, 1), np.float32)), 4, 50, rng)
    actions = np.array(env.actions)
    assert len(actions) == counts.max()
    for i, count in enumerate(counts):
        assert (actions[count:, i] == 0).all()  # done: waits with action 0
        assert len(set(actions[:count, i])) > 1 or count < 5  # random before
    # The stored trajectory starts at the decorrelated state, as an episode start.
    assert step.first.all() and step.real_steps == 0 and (step.frame == counts.max()).all()


def test_decorrelated_training_stores_valid_transitions_and_logs_per_env_epsilons(capsys):
    config = cartpole(max_decorrelation_steps=30, eps_final_min=0.01,
                      exploration_epsilon_end_value=0.2)  # fmt: skip
    trainer, rows = run(config, 2)
    assert "final epsilons of the 4 environments: 0.01, 0.02714, 0.07368, 0.2" in (
        capsys.readouterr().err
    )
    assert_cartpole_transitions(trainer.replay)
    # The row shows the mean of the per-environment epsilons.
    expected = np.mean(trainer.driver.train_epsilon(trainer.frame_t))
    assert float(rows[1]["train_exploration_epsilon"]) == pytest.approx(expected)


# ---- soft target updates --------------------------------------------------------


def test_soft_target_update_by_hand():
    config = cartpole()
    info = Trainer(config).info
    learner = make_learner(config, info, (4,), "cpu", torch.Generator().manual_seed(0))
    with torch.no_grad():
        for p in learner.online.parameters():
            p.fill_(1.0)
        for p in learner.target.parameters():
            p.fill_(3.0)
    learner.update_target(0.25)  # 0.25 x 1 + 0.75 x 3 = 2.5
    assert all(torch.all(p == 2.5) for p in learner.target.parameters())
    learner.update_target(0.5)  # 0.5 x 1 + 0.5 x 2.5 = 1.75
    assert all(torch.all(p == 1.75) for p in learner.target.parameters())
    learner.update_target()  # tau 1: a copy
    assert all(torch.all(p == 1.0) for p in learner.target.parameters())


# ---- the acting drivers ---------------------------------------------------------


def test_parallel_workers_give_the_serial_rows_and_weights():
    serial, serial_rows = run(cartpole())
    parallel, parallel_rows = run(cartpole(acting="parallel", actor_workers=3))
    assert parallel_rows == serial_rows
    a, b = serial.learner.weights(), parallel.learner.weights()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_alternating_halves_store_valid_transitions():
    trainer, rows = run(cartpole(acting="alternating", actor_workers=2))
    assert_cartpole_transitions(trainer.replay)
    assert int(rows[2]["train_num_updates"]) > 0 and int(rows[2]["train_num_episodes"]) > 0


@pytest.mark.parametrize("prefetch_targets, pin_threads", [
    (False, False), (True, False),
    pytest.param(True, True, marks=pytest.mark.skipif(
        pinning.pinned_cores() is None, reason="one usable core, or no affinity")),
])  # fmt: skip
def test_async_holds_the_replay_ratio_both_ways_and_stores_valid_transitions(
    prefetch_targets, pin_threads
):
    config = cartpole(acting="async", replay_ratio=16.0, learn_period=1,
                      replay_ratio_tolerance=0.1, train_frames=1200, threads=1,
                      prefetch_targets=prefetch_targets, pin_threads=pin_threads)  # fmt: skip
    trainer = Trainer(config)
    targets = []  # which thread ran each target network pass
    ran_on = {}  # each thread's cores, at each network pass and each stored row

    def record(*_):
        name = threading.current_thread().name
        ran_on.setdefault(name, set()).add(frozenset(os.sched_getaffinity(0)))

    trainer.learner.target.register_forward_hook(lambda *_: targets.append(
        threading.current_thread().name) or record())  # fmt: skip
    trainer.learner.online.register_forward_hook(record)
    store = trainer.updates.store  # called in the actor's thread
    trainer.updates.store = lambda *args: record() or store(*args)
    cores = os.sched_getaffinity(0)
    rows = [trainer.run_iteration() for _ in range(2)]
    assert 0 <= rows[1]["learner_wait_fraction"] < 1
    # With prefetching, the targets come from its thread (the learner recomputes only
    # those of batches made before a target copy), and the thread ends with the phase.
    prefetched = targets.count("qzoo-prefetch")
    assert prefetched > 0.9 * len(targets) if prefetch_targets else prefetched == 0
    assert not [t for t in threading.enumerate() if t.name == "qzoo-prefetch"]
    # --pin-threads: the learner's thread on the first core, the others on the rest;
    # each thread's cores given back after the phase (evaluation runs anywhere).
    if pin_threads:
        learner_cores, other_cores = pinning.pinned_cores()
        assert ran_on["qzoo-actor"] == ran_on["qzoo-prefetch"] == {frozenset(other_cores)}
        assert ran_on["MainThread"] == {frozenset(learner_cores)}  # its updates
    else:
        assert all(on == {frozenset(cores)} for on in ran_on.values())
    assert os.sched_getaffinity(0) == cores
    gate = trainer.driver.gate
    # One update of slack and one actor step (4 frames x 1/4 update) on top of 10%.
    slack = (1 + 4 * gate.per_unit) / gate.settle
    assert gate.deviation is not None and gate.deviation <= 0.1 + slack
    # Caught up at the end of the phase, never more than 10% ahead.
    assert int(gate.target()) <= gate.consumed <= gate.target() * 1.1
    assert_cartpole_transitions(trainer.replay)


def test_ratio_gate_lets_exactly_one_side_go_when_the_other_is_ahead():
    gate = RatioGate(1, tolerance=0.1)
    assert gate.actor_may_go() and not gate.learner_may_go()  # nothing collected yet
    gate.add_collected(100)  # target 100 updates
    assert gate.learner_may_go() and not gate.actor_may_go()
    gate.add_consumed(89)  # 89 >= 100 x 0.9 - 1
    assert gate.actor_may_go() and gate.learner_may_go()
    gate.add_consumed(21)  # 110: at the upper bound
    assert gate.actor_may_go() and not gate.learner_may_go()
    gate.finish()
    assert not gate.learner_may_go()


def test_lockstep_is_asyncs_schedule_in_the_serial_drivers_one_thread(monkeypatch):
    """--acting async --deterministic: the serial driver with a Lockstep; no thread is
    started, every update the gate allows is done, and the actor's copy gets the
    learner's weights at each phase start and every --publish-period updates."""
    from qzoo.acting.serial import SerialDriver

    trainer = Trainer(cartpole(acting="async", deterministic=True, publish_period=5))
    driver, learner = trainer.driver, trainer.learner
    assert type(driver) is SerialDriver and driver.lockstep is not None
    lockstep, batch = driver.lockstep, trainer.config.batch_size
    published, start = [], lockstep.publish

    def publish():
        published.append(trainer.updates.transitions_sampled // batch)
        start()

    monkeypatch.setattr(lockstep, "publish", publish)
    monkeypatch.setattr(threading.Thread, "start", lambda self: pytest.fail("a thread"))
    trainer.run_iteration()  # iteration 0 evaluates only (DQN Zoo)
    trainer.run_iteration()
    done = trainer.updates.transitions_sampled // batch
    gate = lockstep.gate
    assert done == gate.consumed == int(gate.target()) > 10  # all the gate allows
    assert published == [0, *range(5, done + 1, 5)]
    copy, online = lockstep.actor_policy.network.state_dict(), learner.online.state_dict()
    same = all(torch.equal(copy[k], online[k]) for k in online)
    assert same == (done % 5 == 0)  # the copy lags by the updates since the last one


@pytest.mark.parametrize("options", [
    {"acting": "async", "deterministic": True, "publish_period": 5},
    {"acting": "alternating", "actor_workers": 2},
])  # fmt: skip
def test_synchronous_modes_resume_bit_identically(options, tmp_path):
    config = cartpole(**options)
    whole, whole_rows = run(config, 3)
    first, _ = run(config, 2)
    checkpoint.save(tmp_path / "ckpt", {"trainer": first.state_dict()})
    resumed = Trainer(config)
    resumed.load_state_dict(checkpoint.load(tmp_path / "ckpt")["trainer"])
    assert comparable(resumed.run_iteration()) == whole_rows[2]
    a, b = whole.learner.weights(), resumed.learner.weights()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # Not the serial run: stale weights (async) or per-half draws (alternating).
    _, serial_rows = run(cartpole(), 3)
    assert serial_rows[2]["train_loss"] != whole_rows[2]["train_loss"]


BAD = [
    (["--actor-workers", "0"], "--actor-workers: bad value 0; expected an integer in [1, 256]"),
    (["--replay-ratio", "8", "--learn-period", "4"], "--replay-ratio 8 and --learn-period 4"),
    (["--actor-workers", "2"], "--actor-workers: bad value 2; expected no --actor-workers here"),
    (["--acting", "async", "--offline", "x"], "--acting: bad value async; expected serial"),
    (["--acting", "alternating", "--num-envs", "4", "--actor-workers", "3"], "an even number"),
    (["--acting", "parallel", "--actor-workers", "4"], "at most --num-envs 1"),
    (["--deterministic"], "--deterministic: bad value true; expected no --deterministic"),
    (["--target-update-tau", "0"], "--target-update-tau: bad value 0; expected"),
    (["--acting", "thread"], "--acting: bad value thread; expected one of serial, parallel"),
    (["--eps-final-min", "0.01", "--apex-epsilon", "0.4"], "--apex-epsilon: bad value 0.4"),
    (["--apex-alpha", "3"], "--apex-alpha: bad value 3; expected no --apex-alpha here"),
    (["--acting", "async", "--recurrent"], "--acting: bad value async; expected serial or"),
    (["--prefetch-targets"], "--prefetch-targets: bad value true; expected false with --acting serial"),
    (["--acting", "async", "--prefetch-targets", "--deterministic"], "false with --determ"),
    (["--acting", "async", "--prefetch-targets", "--noisy"], "false with --noisy: its target"),
    (["--acting", "async", "--prefetch-targets", "--distribution", "implicit_quantile"],
     "false with --distribution implicit_quantile"),
    (["--acting", "async", "--prefetch-targets", "--target-update-tau", "0.5"],
     "--prefetch-targets: bad value true; expected false with --target-update-tau below 1"),
    (["--acting", "async", "--prefetch-targets", "--compile"], "false with --compile"),
    (["--pin-threads"], "--pin-threads: bad value true; expected false with --acting serial"),
    (["--acting", "async", "--pin-threads", "--threads", "1", "--deterministic"],
     "--pin-threads: bad value true; expected false with --deterministic"),
    (["--actor-process"], "--actor-process: bad value true; expected false with --acting serial"),
    (["--acting", "async", "--actor-process", "--deterministic"], "false with --deterministic"),
    (["--acting", "async", "--actor-process", "--threads", "2"],
     "--actor-process: bad value true; expected false with --threads above 1 (OpenMP's"),
    (["--acting", "async", "--actor-process", "--num-envs", "2", "--actor-workers", "2"],
     "--actor-process: bad value true; expected false with --actor-workers above 1"),
    (["--acting", "async", "--pin-threads", "--threads", "2"],
     "--pin-threads: bad value true; expected false with --threads above 1: it pins one PyTorch"),
]  # fmt: skip


@pytest.mark.parametrize("argv, fragment", BAD)
def test_bad_acting_input_is_one_line_exit_2(argv, fragment, tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = ["train", "dqn", "--env", "CartPole-v1", *argv, "--run-dir", str(run_dir)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("qzoo: note:")]
    assert len(lines) == 1 and lines[0].startswith("qzoo: error: ") and fragment in lines[0], err
    assert not run_dir.exists()
