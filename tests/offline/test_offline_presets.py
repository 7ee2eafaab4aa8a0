"""batch_rl's fixed-replay presets carry its gin values (batch_rl_dopamine.md §2.2), in
qzoo's units: frames, 4 per agent step."""

import pytest

from qzoo.configuration import PRESETS, make_config, preset_values

BATCH_RL = ("offline_dqn", "offline_c51", "offline_qrdqn", "ensemble", "rem")


@pytest.mark.parametrize("agent", BATCH_RL)
def test_batch_rl_schedule_in_frames(agent):
    c = make_config(agent, "pong", "atari", {})
    steps = c.action_repeats  # frames per agent step
    assert steps == 4
    assert c.train_frames // steps == 250_000  # FixedReplayRunner.training_steps
    assert c.train_frames // c.learn_period == 62_500  # updates per iteration
    assert c.learn_period // steps == 4  # update_period
    assert c.target_network_update_period // steps == 8_000  # target_update_period
    assert c.target_network_update_period // c.learn_period == 2_000  # updates per sync
    assert c.eval_frames // steps == 125_000 and c.eval_exploration_epsilon == 0.001
    assert c.max_frames_per_episode // steps == 27_000 and c.iterations == 200
    assert c.protocol == "machado"  # sticky actions 0.25: the dataset's protocol
    assert (c.discount, c.n_steps, c.replay_capacity, c.batch_size) == (0.99, 1, 10**6, 32)
    # Plain Huber, no TD-error or gradient-norm clip, no double Q, no CQL.
    assert (c.grad_error_bound, c.max_global_grad_norm, c.double_q, c.cql_alpha) == (
        0.0, 0.0, False, 0.0,
    )  # fmt: skip
    # Online only: min_replay_history 20,000 steps; epsilon 1 -> 0.01 over 250,000 steps.
    assert c.min_replay_size == 20_000 and c.exploration_epsilon_end_value == 0.01
    assert c.exploration_decay_frames // steps == 250_000
    assert "arXiv:1907.04543" in PRESETS[agent]["paper"]
    # Dopamine's network: 'same' padding; Keras's Glorot for its NatureDQNNetwork (DQN,
    # and each of online REM's networks), batch_rl's variance scaling for the others.
    assert c.torso == "dopamine_cnn"
    glorot = agent in ("offline_dqn", "rem")  # without a dataset, rem is online REM
    assert c.init == ("glorot" if glorot else "variance_scaling")


def test_batch_rl_algorithms_and_optimizers():
    def values(agent, *names):
        c = make_config(agent, "pong", "atari", {})
        return tuple(getattr(c, name) for name in names)

    optimizer = ("optimizer", "learning_rate", "optimizer_epsilon")
    assert values("offline_dqn", *optimizer, "rmsprop_decay", "distribution") == (
        "rmsprop_centered_tf1", 2.5e-4, 1e-5, 0.95, "none",
    )  # fmt: skip
    assert values("offline_c51", *optimizer, "distribution", "num_atoms", "vmax") == (
        "adam_tf1", 2.5e-4, 3.125e-4, "categorical", 51, 10.0,
    )  # fmt: skip
    assert values("offline_qrdqn", *optimizer, "distribution", "num_quantiles") == (
        "adam_tf1", 5e-5, 3.125e-4, "quantile", 200,
    )  # fmt: skip
    assert values("offline_qrdqn", "huber_param") == (1.0,)
    assert values("ensemble", *optimizer, "num_heads", "head_mixing") == (
        "adam_tf1", 5e-5, 3.125e-4, 200, "identity",
    )  # fmt: skip


def test_rem_offline_is_batch_rls_and_online_the_papers_four_networks():
    offline = preset_values("rem", offline=True)
    assert (offline["num_heads"], offline["head_mixing"]) == (200, "stochastic")
    assert offline["optimizer_epsilon"] == 3.125e-4 and "separate_networks" not in offline
    assert offline["init"] == "variance_scaling"  # batch_rl's MultiHeadQNetwork
    # With a dataset (--offline DIR) the config is batch_rl's rem.gin.
    c = make_config("rem", "pong", "atari", {"offline": "Pong/1"})
    assert (c.num_heads, c.separate_networks, c.init) == (200, False, "variance_scaling")
    assert c.optimizer_epsilon == 3.125e-4
    online = make_config("rem", "pong", "atari", {})  # no dataset: online
    assert (online.num_heads, online.separate_networks, online.head_mixing) == (
        4, True, "stochastic",
    )  # fmt: skip
    assert online.deep_exploration and not c.deep_exploration  # use_deep_exploration
    assert (online.optimizer, online.learning_rate, online.optimizer_epsilon) == (
        "adam_tf1", 5e-5, 3.125e-5,  # online/configs/rem.gin: an epsilon 10x smaller
    )  # fmt: skip
    # The other presets have one set of values.
    for agent in PRESETS:
        if agent != "rem":
            assert preset_values(agent, offline=True) == preset_values(agent, offline=False)


@pytest.mark.parametrize("env, domain", [("CartPole-v1", "gym"), ("minatar/breakout", "minatar")])
def test_batch_rl_presets_off_atari_keep_their_algorithm(env, domain):
    c = make_config("rem", env, domain, {})
    assert c.protocol == "dqn_zoo"  # Atari's sticky actions mean nothing here
    assert c.torso != "dopamine_cnn"  # the domain's torso
    assert (c.num_heads, c.head_mixing) == (4, "stochastic")
    assert make_config("offline_qrdqn", env, domain, {}).num_quantiles == 200
