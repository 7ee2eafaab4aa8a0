"""Networks, exploration and the human-normalized score table."""

import math

import numpy as np
import pytest
import torch

from qzoo.acting.exploration import epsilon_greedy
from qzoo.acting.schedule import LinearSchedule
from qzoo.configuration import make_config
from qzoo.envs import EnvInfo, scores
from qzoo.networks.heads import Head, NoisyLinear, SharedBiasLinear
from qzoo.networks.network import make_network
from qzoo.networks.torsos import DopamineTorso, NatureTorso


def test_nature_network_sizes_match_dqn_zoo():
    torso = NatureTorso(4)
    assert sum(p.numel() for p in torso.parameters()) == 77_984
    net = atari_network("dqn")
    assert sum(p.numel() for p in net.parameters()) == 1_687_206
    q = net(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).q_values
    assert q.shape == (2, 6)


PONG = EnvInfo("pong", "atari", 6, (84, 84), np.uint8, "pong")


def atari_network(agent, **overrides):
    return make_network(make_config(agent, "pong", "atari", overrides), PONG, (4, 84, 84))


def torso_input_max(net, obs):
    seen = []
    net.torso.register_forward_pre_hook(lambda module, args: seen.append(args[0].max().item()))
    net(obs)
    return seen[0]


def test_only_atari_pixels_are_divided_by_255():
    atari = torch.full((1, 4, 84, 84), 255, dtype=torch.uint8)
    assert torso_input_max(atari_network("dqn"), atari) == pytest.approx(1.0)
    # MinAtar's channels are 0/1 uint8: the network must see them as 0/1.
    breakout = EnvInfo("minatar/breakout", "minatar", 6, (4, 10, 10), np.uint8, None)
    config = make_config("dqn", "minatar/breakout", "minatar", {})
    net = make_network(config, breakout, (4, 10, 10))
    assert torso_input_max(net, torch.ones(1, 4, 10, 10, dtype=torch.uint8)) == 1.0


def test_legacy_initialization_bounds():
    net = atari_network("dqn")
    for module in net.modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d)):
            bound = 1 / math.sqrt(module.weight[0].numel())
            for p in (module.weight, module.bias):
                assert p.abs().max().item() <= bound
            # Weights fill the bound (U(-c, c) with c = 1/sqrt(fan_in), not a normal).
            assert module.weight.abs().max().item() > 0.9 * bound


def test_dopamine_torso_pads_as_tf_same():
    # batch_rl_dopamine.md §2.4: 84 -> 21 -> 11 -> 11; pads 2/2, 1/2 (the odd pixel
    # bottom and right), 1/1; flatten 11 * 11 * 64 = 7,744.
    torso = DopamineTorso(4)
    pads = [m.padding for m in torso.net if isinstance(m, torch.nn.ZeroPad2d)]
    assert pads == [(2, 2, 2, 2), (1, 2, 1, 2), (1, 1, 1, 1)]  # (left, right, top, bottom)
    assert torso.out_features == 7744
    assert torso(torch.zeros(2, 4, 84, 84)).shape == (2, 7744)
    assert sum(p.numel() for p in torso.parameters()) == 77_984  # the same convolutions
    # The stride-1 layer pads as PyTorch's own padding="same".
    conv = torso.net[-3]
    x = torch.randn(1, 64, 11, 11)
    same = torch.nn.functional.conv2d(x, conv.weight, conv.bias, padding="same")
    torch.testing.assert_close(conv(torso.net[-4](x)), same)


@pytest.mark.parametrize("init", ["glorot", "variance_scaling"])
def test_dopamine_initializers(init):
    net = atari_network("dqn", init=init, torso="dopamine_cnn")
    assert net.head.net[0].in_features == 7744
    for module in net.modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d)):
            fan_in = module.weight[0].numel()
            fan_out = module.weight.shape[0] * module.weight[0, 0].numel()
            if init == "glorot":  # Keras's default: sqrt(6 / (fan_in + fan_out))
                bound = math.sqrt(6 / (fan_in + fan_out))
            else:  # VarianceScaling(1/sqrt(3), fan_in, uniform): sqrt(3 / sqrt(3) / fan_in)
                bound = 1.3160740129524924 / math.sqrt(fan_in)
            # (float32 rounds the bound itself by a few parts in 1e8)
            assert bound * 0.9 < module.weight.abs().max().item() <= bound * (1 + 1e-6)
            assert not module.bias.any()  # zero biases


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
    generator = torch.Generator().manual_seed(0)
    q = torch.tensor([[1.0, 1.0, 0.0]]).repeat(20_000, 1)
    greedy = epsilon_greedy(q, torch.zeros(20_000), generator)
    counts = np.bincount(greedy.numpy(), minlength=3) / len(greedy)
    assert counts[2] == 0 and counts[0] == pytest.approx(0.5, abs=0.02)
    explored = epsilon_greedy(q, torch.ones(20_000), generator).numpy()
    assert np.bincount(explored, minlength=3) / len(explored) == pytest.approx(
        [1 / 3] * 3, abs=0.02
    )
    # Per-environment epsilon: only the second row explores.
    q2 = torch.tensor([[0.0, 1.0]]).repeat(2000, 1)
    mixed = epsilon_greedy(q2, torch.tensor([0.0, 1.0] * 1000), generator).numpy()
    assert (mixed[::2] == 1).all() and 0.4 < (mixed[1::2] == 0).mean() < 0.6


def test_noisy_layers_draw_from_the_given_generator():
    net = atari_network("rainbow")
    obs = torch.zeros(1, 4, 84, 84, dtype=torch.uint8)
    a = net(obs, generator=torch.Generator().manual_seed(3)).q_values
    torch.manual_seed(0)  # the global generator must not matter
    b = net(obs, generator=torch.Generator().manual_seed(3)).q_values
    c = net(obs, generator=torch.Generator().manual_seed(4)).q_values
    assert torch.equal(a, b) and not torch.equal(a, c)


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
    from qzoo.configuration import make_config

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


def test_distributional_network_shapes():
    obs = torch.zeros(3, 4, 84, 84, dtype=torch.uint8)
    c51 = atari_network("c51")(obs)
    assert c51.q_logits.shape == (3, 6, 51) and c51.q_values.shape == (3, 6)
    assert not c51.q_values.requires_grad  # q_values carry no gradient (DQN Zoo)
    qr = atari_network("qrdqn")(obs)
    assert qr.q_dist.shape == (3, 201, 6)  # quantiles before actions, as DQN Zoo
    torch.testing.assert_close(qr.q_values, qr.q_dist.mean(1))
    iqn = atari_network("iqn", tau_latent_dim=5)
    out = iqn(obs, torch.rand(3, 7))
    assert out.q_dist.shape == (3, 7, 6) and out.q_values.shape == (3, 6)


def test_categorical_q_values_are_means_over_the_support():
    net = atari_network("c51")
    out = net(torch.zeros(1, 4, 84, 84, dtype=torch.uint8))
    probs = torch.softmax(out.q_logits, -1)
    support = torch.linspace(-10, 10, 51)
    torch.testing.assert_close(out.q_values, (probs * support).sum(-1))


def test_dueling_head_subtracts_the_mean_advantage():
    head = Head(8, 16, num_actions=4, width=1, dueling=True)
    x = torch.randn(5, 8)
    q = head(x)[..., 0]
    value = head.value(x)
    torch.testing.assert_close(q.mean(1, keepdim=True), value)


def test_noisy_linear_parameters_and_fresh_noise():
    layer = NoisyLinear(9, 4, weight_init=0.1, bias=False)
    assert layer.bias_mu is None and layer.bias_sigma.shape == (4,)  # sigma always has a bias
    assert torch.all(layer.weight_sigma == 0.1 / 3) and torch.all(layer.bias_sigma == 0.1 / 3)
    x = torch.ones(2, 9)
    a, b = layer(x), layer(x)
    assert not torch.equal(a, b)  # a new noise sample on every forward pass
    torch.testing.assert_close(a[0], a[1])  # shared across the batch
    torch.manual_seed(0)
    c = layer(x)
    torch.manual_seed(0)
    torch.testing.assert_close(c, layer(x))


def test_rainbow_network_is_noisy_dueling_categorical():
    net = atari_network("rainbow")
    noisy = [m for m in net.modules() if isinstance(m, NoisyLinear)]
    assert len(noisy) == 4
    # The streams' last layers have no mu bias (DQN Zoo).
    assert [m.bias_mu is None for m in noisy] == [False, True, False, True]
    out = net(torch.zeros(2, 4, 84, 84, dtype=torch.uint8))
    assert out.q_logits.shape == (2, 6, 51)


def test_noise_is_a_truncated_normal_then_signed_square_root():
    from qzoo.networks.draws import factorised_noise

    torch.manual_seed(0)
    f = factorised_noise((200_000,), None, "cpu")
    x = f.sign() * f.square()  # undo sign(x) sqrt(|x|)
    assert x.abs().max() <= 2.0 + 1e-5
    # Standard normal truncated to [-2, 2]: mean 0, variance 0.7737.
    assert abs(x.mean().item()) < 0.01 and x.var().item() == pytest.approx(0.7737, abs=0.01)
