"""The parts stand alone: evaluation never changes training, the learner needs no
environment, objectives are chosen by the preset, actors run anywhere."""

import concurrent.futures

import numpy as np
import pytest
import torch

from qzoo.acting.actor import Actor
from qzoo.acting.from_config import acting_of, in_process
from qzoo.acting.policy import Policy
from qzoo.configuration import PRESETS, make_config
from qzoo.envs import EnvInfo
from qzoo.learning.from_config import OBJECTIVES, make_learner, make_objective
from qzoo.replay import Batch
from qzoo.run.trainer import Trainer
from qzoo.streams import Streams

TRAINING_COLUMNS = ("train_episode_return", "train_num_episodes", "train_exploration_epsilon",
                    "train_state_value", "train_loss", "train_mean_q", "train_num_updates")  # fmt: skip
SMALL = {"iterations": 2, "train_frames": 400, "replay_capacity": 1000,
         "min_replay_capacity_fraction": 0.1, "learn_period": 4, "num_quantiles": 8,
         "tau_samples_policy": 4, "tau_samples_s_tm1": 5, "tau_samples_s_t": 6}  # fmt: skip


def training(agent, eval_frames):
    config = make_config(agent, "CartPole-v1", "gym", {**SMALL, "eval_frames": eval_frames})
    trainer = Trainer(config)
    rows = [trainer.run_iteration() for _ in range(3)]
    weights = trainer.learner.weights()
    return [[repr(row.get(k)) for k in TRAINING_COLUMNS] for row in rows], weights, rows


@pytest.mark.parametrize("agent", ["dqn", "rainbow", "iqn"])
def test_evaluation_length_does_not_change_training(agent):
    """Evaluation draws env seeds, exploration, noise and taus from its own stream."""
    short, short_weights, short_rows = training(agent, 500)
    long, long_weights, long_rows = training(agent, 2000)
    assert short == long
    assert all(torch.equal(short_weights[k], long_weights[k]) for k in short_weights)
    assert short_rows[-1]["train_num_updates"] > 0
    # ... while the evaluations themselves did differ.
    assert [r["eval_num_episodes"] for r in short_rows] != [
        r["eval_num_episodes"] for r in long_rows
    ]


CARTPOLE = EnvInfo("CartPole-v1", "gym", 2, (4,), np.float32, "CartPole-v1")


def batch_by_hand(size=8):
    rng = np.random.default_rng(0)
    return Batch(
        s_tm1=rng.normal(size=(size, 4)).astype(np.float32), a_tm1=rng.integers(2, size=size),
        r_t=np.ones(size, np.float32), discount_t=np.full(size, 0.9, np.float32),
        s_t=rng.normal(size=(size, 4)).astype(np.float32),
    )  # fmt: skip


@pytest.mark.parametrize("agent", ["dqn", "double_q", "c51", "qrdqn", "iqn", "rainbow",
                                   "offline_dqn", "offline_qrdqn", "ensemble", "rem"])  # fmt: skip
def test_learner_learns_from_a_batch_without_any_environment(agent):
    config = make_config(agent, "CartPole-v1", "gym", {"num_quantiles": 8, "cql_alpha": 0.1})
    learner = make_learner(config, CARTPOLE, (4,), "cpu", torch.Generator().manual_seed(0))
    before = {k: v.clone() for k, v in learner.online.state_dict().items()}
    batch = batch_by_hand()
    assert learner.learn(batch) is None  # no importance weights: no priorities
    priorities = learner.learn(batch._replace(weights=np.ones(8, np.float32)))
    assert priorities.shape == (8,) and (priorities >= 0).all()
    assert any(not torch.equal(before[k], v) for k, v in learner.online.state_dict().items())
    stats = learner.pop_statistics()
    assert stats["num_updates"] == 2 and np.isfinite(stats["loss"])


def test_objectives_are_chosen_by_the_preset_and_unknown_ones_refused():
    # (distribution, head mixing): the mixing counts only with several heads.
    assert set(OBJECTIVES) == {("none", None), ("categorical", None), ("quantile", None),
                               ("implicit_quantile", None), ("none", "identity"),
                               ("none", "stochastic"), ("recurrent", None),
                               ("returns", None)}  # fmt: skip
    names = {agent: type(make_objective(make_config(agent, "pong", "atari", {}))).__name__
             for agent in PRESETS}  # fmt: skip
    assert names == {"dqn": "QLearning", "double_q": "QLearning", "prioritized": "QLearning",
                     "c51": "CategoricalQLearning", "qrdqn": "QuantileQLearning",
                     "iqn": "ImplicitQuantileQLearning", "rainbow": "CategoricalQLearning",
                     "offline_dqn": "QLearning", "offline_c51": "CategoricalQLearning",
                     "offline_qrdqn": "QuantileQLearning", "ensemble": "EnsembleQLearning",
                     "rem": "REMQLearning", "r2d1": "R2D1SequenceLearning",
                     "r2d1_long": "R2D1SequenceLearning", "der": "CategoricalQLearning",
                     "drq_eps": "QLearning", "pqn": "QRegression"}  # fmt: skip
    # One head mixed either way is plain Q-learning.
    one = make_config("rem", "pong", "atari", {"num_heads": 1, "separate_networks": False})
    assert type(make_objective(one)).__name__ == "QLearning"
    heads = {"num_heads": 4, "head_mixing": "identity"}
    assert type(make_objective(make_config("dqn", "pong", "atari", heads))).__name__ == (
        "EnsembleQLearning"
    )
    heads["head_mixing"] = "stochastic"
    assert type(make_objective(make_config("dqn", "pong", "atari", heads))).__name__ == (
        "REMQLearning"
    )
    config = make_config("dqn", "pong", "atari", {})
    config.distribution = "mixture"
    with pytest.raises(ValueError, match="no objective for distribution 'mixture'"):
        make_objective(config)
    config = make_config("dqn", "pong", "atari", heads)
    config.distribution = "quantile"  # validation refuses this; the registry does too
    with pytest.raises(ValueError, match="'quantile' with head mixing 'stochastic'"):
        make_objective(config)


def test_double_q_selects_with_the_online_network_and_values_with_the_target():
    config = make_config("dqn", "CartPole-v1", "gym", {})
    learner = make_learner(config, CARTPOLE, (4,), "cpu", torch.Generator().manual_seed(0))
    batch = batch_by_hand().to("cpu")
    torch.manual_seed(0)
    with torch.no_grad():
        for p in learner.online.parameters():  # online and target now disagree
            p.add_(torch.randn_like(p))
        q_tm1 = learner.online(batch.s_tm1).q_values[torch.arange(8), batch.a_tm1]
        q_t = learner.target(batch.s_t).q_values
        chosen = learner.online(batch.s_t).q_values.argmax(1)
    assert not torch.equal(chosen, q_t.argmax(1))
    plain, double = OBJECTIVES[("none", None)](config), make_objective(config)
    double.double_q = True
    args = (learner.online, learner.target, batch, None)
    expected_double = batch.r_t + batch.discount_t * q_t[torch.arange(8), chosen] - q_tm1
    expected_plain = batch.r_t + batch.discount_t * q_t.max(1).values - q_tm1
    torch.testing.assert_close(double(*args).priorities, expected_double.abs())
    torch.testing.assert_close(plain(*args).priorities, expected_plain.abs())


def actor_rows(config, info, network, stream_state, steps, in_thread):
    streams = Streams(config.seed)
    streams.actor.load_state_dict(stream_state)
    actor = Actor(acting_of(config), info, Policy(network, 1), streams.actor, lambda t: 0.5,
                  in_process(config))  # fmt: skip
    rows = []

    def act():
        actor.start()
        rows.extend(actor.step()[0] for _ in range(steps))
        actor.stop()

    if in_thread:  # result() re-raises what the thread raised
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(act).result()
    else:
        act()
    return rows


def test_actor_runs_in_a_thread_with_a_copy_of_the_weights():
    """Same stream state and weights: the same rows, serial or in a thread, whether
    the policy shares the learner's network or holds a copy loaded from weights()."""
    config = make_config("dqn", "CartPole-v1", "gym", {"num_envs": 3})
    learner = make_learner(config, CARTPOLE, (4,), "cpu", torch.Generator())
    copy = make_learner(config, CARTPOLE, (4,), "cpu", torch.Generator()).online
    Policy(copy, 1).load_weights(learner.weights())
    state = Streams(config.seed).actor.state_dict()
    serial = actor_rows(config, CARTPOLE, learner.online, state, 40, in_thread=False)
    threaded = actor_rows(config, CARTPOLE, copy, state, 40, in_thread=True)
    assert len(serial) == len(threaded) == 40
    for a, b in zip(serial, threaded):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert len({int(a) for row in serial for a in row.action}) == 2  # it explored
