"""Networks, exploration and the human-normalized score table."""

import math

import numpy as np
import pytest
import torch

from qzoo.envs import scores
from qzoo.explore import LinearSchedule, epsilon_greedy
from qzoo.networks import NatureTorso, QNetwork, SharedBiasLinear


def test_nature_network_sizes_match_dqn_zoo():
    torso = NatureTorso(4)
    assert sum(p.numel() for p in torso.parameters()) == 77_984
    net = QNetwork(NatureTorso(4), 6)
    assert sum(p.numel() for p in net.parameters()) == 1_687_206
    q = net(torch.zeros(2, 4, 84, 84, dtype=torch.uint8))
    assert q.shape == (2, 6)


def test_legacy_initialization_bounds():
    net = QNetwork(NatureTorso(4), 6)
    for module in net.modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d)):
            bound = 1 / math.sqrt(module.weight[0].numel())
            for p in (module.weight, module.bias):
                assert p.abs().max().item() <= bound
            # Weights fill the bound (U(-c, c) with c = 1/sqrt(fan_in), not a normal).
            assert module.weight.abs().max().item() > 0.9 * bound


def test_shared_bias_linear():
    layer = SharedBiasLinear(3, 4)
    assert [p.shape for p in layer.parameters()] == [(4, 3), (1,)]
    with torch.no_grad():
        layer.weight.zero_()
        layer.bias.fill_(1.23)
    assert layer(torch.randn(2, 3)).flatten().tolist() == pytest.approx([1.23] * 8)


def test_linear_schedule_descent():
    schedule = LinearSchedule(begin_t=5, decay_steps=7, begin_value=1.0, end_value=0.3)
    assert [schedule(t) for t in (-1, 0, 5)] == [1.0, 1.0, 1.0]
    assert schedule(8) == pytest.approx(1.0 - 3 / 7 * 0.7)
    assert schedule(12) == pytest.approx(0.3) and schedule(1000) == pytest.approx(0.3)


def test_epsilon_greedy_breaks_ties_uniformly_and_explores():
    rng = np.random.RandomState(0)
    q = np.tile(np.array([[1.0, 1.0, 0.0]]), (20_000, 1))
    greedy = epsilon_greedy(q, 0.0, rng)
    counts = np.bincount(greedy, minlength=3) / len(greedy)
    assert counts[2] == 0 and counts[0] == pytest.approx(0.5, abs=0.02)
    explored = epsilon_greedy(q, 1.0, rng)
    assert np.bincount(explored, minlength=3) / len(explored) == pytest.approx([1 / 3] * 3, abs=0.02)
    # Per-environment epsilon: only the second row explores.
    mixed = epsilon_greedy(np.array([[0.0, 1.0]] * 2000), np.array([0.0, 1.0] * 1000), rng)
    assert (mixed[::2] == 1).all() and 0.4 < (mixed[1::2] == 0).mean() < 0.6


def test_score_table_has_57_games_and_normalizes():
    assert len(scores.ATARI_GAMES) == 57
    for game, (random_score, human_score) in scores.ATARI_SCORES.items():
        assert human_score > random_score, game
        assert scores.normalized_return(game, human_score) == pytest.approx(1.0)
        assert scores.normalized_return(game, random_score) == pytest.approx(0.0)
    assert math.isnan(scores.normalized_return("not_a_game", 1.0))
    cols = scores.normalized_columns("pong", 21.0)
    assert cols["normalized_return"] == pytest.approx((21 + 20.7) / 35.3)
    assert cols["capped_normalized_return"] == 1.0 and cols["human_gap"] == 0.0


def test_presets_and_domain_layers():
    from qzoo.config import make_config

    atari = make_config("double_q", "pong", "atari", {})
    # DQN Zoo's double_q defaults (dqn_zoo.md §1b).
    assert (atari.double_q, atari.shared_bias) == (True, True)
    assert atari.target_network_update_period == 120_000
    assert atari.exploration_epsilon_end_value == 0.01 and atari.eval_exploration_epsilon == 0.01
    assert atari.learning_rate == 2.5e-4 and atari.optimizer_epsilon == 0.01 / 32**2
    assert atari.exploration_begin_frame == 200_000
    assert atari.exploration_decay_frames == 4_000_000
    dqn = make_config("dqn", "pong", "atari", {"learning_rate": 1e-4})
    assert dqn.target_network_update_period == 40_000 and dqn.eval_exploration_epsilon == 0.05
    assert dqn.exploration_epsilon_end_value == 0.1 and dqn.learning_rate == 1e-4
    small = make_config("double_q", "CartPole-v1", "gym", {})
    assert small.double_q and small.target_network_update_period == 500
