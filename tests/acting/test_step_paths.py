"""The per-step fast paths of issue 13 (a small network on a CPU) compute what the plain
ones do: the same actions, draws, values and gradients."""

import copy
import fractions

import numpy as np
import pytest
import torch

from qzoo import envs
from qzoo.acting.actor import EpisodeStats
from qzoo.acting.exploration import epsilon_greedy
from qzoo.acting.policy import Policy
from qzoo.acting.ratio import UpdateSchedule
from qzoo.configuration import build_config
from qzoo.envs import EnvStep
from qzoo.networks.host_mlp import HostMlp
from qzoo.networks.network import make_network


def cartpole_network(**options):
    config = build_config("dqn", {"env": "CartPole-v1", "mlp_hidden": 24, **options})
    torch.manual_seed(0)
    return make_network(config, envs.describe(config), (4,))


def test_host_epsilon_greedy_draws_and_chooses_as_the_tensor_path():
    # Ties (equal maxima) and per-row epsilons, 0 to 1: every branch of both paths.
    rng = np.random.default_rng(0)
    q = rng.integers(0, 3, size=(500, 4)).astype(np.float32)
    epsilon = np.repeat(np.array([0.0, 0.3, 1.0], np.float32), [200, 200, 100])
    tensor_stream, host_stream = (torch.Generator().manual_seed(7) for _ in range(2))
    for _ in range(3):  # consecutive calls: the streams stay in step
        expected = epsilon_greedy(torch.from_numpy(q), torch.from_numpy(epsilon), tensor_stream)
        actions = epsilon_greedy(q, epsilon, host_stream)
        assert actions.dtype == np.int64
        np.testing.assert_array_equal(actions, expected.numpy())
    assert torch.equal(tensor_stream.get_state(), host_stream.get_state())


def test_plain_mlp_forward_equals_the_module_path_in_values_and_gradients():
    network = cartpole_network()
    assert len(network._mlp) == 4  # torso 2, head 2
    x = torch.randn(64, 4)

    def run():
        out = network(x)
        grads = torch.autograd.grad(out.q_values.square().sum(), list(network.parameters()))
        return out, grads

    fast, fast_grads = run()
    layers, network._mlp = network._mlp, None  # the nn.Module path
    slow, slow_grads = run()
    network._mlp = layers
    assert torch.equal(fast.q_values, slow.q_values) and torch.equal(fast.q_heads, slow.q_heads)
    assert all(torch.equal(a, b) for a, b in zip(fast_grads, slow_grads))
    target = copy.deepcopy(network)  # the target network calls its own layers
    assert target._mlp[0] is target.torso.net[0] and target._mlp[0] is not layers[0]


@pytest.mark.parametrize("options", [{"dueling": True}, {"noisy": True}, {"num_heads": 2}])
def test_other_networks_keep_the_module_path(options):
    network = cartpole_network(**options)
    assert network._mlp is None and HostMlp.of(network) is None


def test_host_mlp_follows_the_networks_weights():
    network = cartpole_network()
    host = HostMlp.of(network)
    x = np.random.default_rng(1).standard_normal((32, 4)).astype(np.float32)

    def torch_q():
        with torch.no_grad():
            return network(torch.from_numpy(x)).q_values.numpy()

    np.testing.assert_allclose(host(x), torch_q(), rtol=1e-5, atol=1e-6)
    with torch.no_grad():  # an optimizer's in-place step
        for p in network.parameters():
            p.add_(0.25)
    np.testing.assert_allclose(host(x), torch_q(), rtol=1e-5, atol=1e-6)
    network.load_state_dict({k: -v for k, v in network.state_dict().items()})
    np.testing.assert_allclose(host(x), torch_q(), rtol=1e-5, atol=1e-6)
    layer = network._mlp[1]  # a replaced parameter is seen too
    layer.weight = torch.nn.Parameter(torch.zeros_like(layer.weight))
    np.testing.assert_allclose(host(x), torch_q(), rtol=1e-5, atol=1e-6)


def test_cpu_policy_acts_as_its_network_says():
    network = cartpole_network()
    policy = Policy(network, tau_samples=8)
    assert policy._host is not None
    obs = np.random.default_rng(2).standard_normal((50, 4)).astype(np.float32)
    generator = torch.Generator().manual_seed(3)
    actions, value = policy(obs, np.zeros(50, np.float32), generator)
    with torch.no_grad():
        q = network(torch.from_numpy(obs)).q_values
    np.testing.assert_array_equal(actions, q.argmax(1).numpy())
    assert value == pytest.approx(float(q.max(1).values.mean()), rel=1e-6)
    explored, _ = policy(obs, np.ones(50, np.float32), generator)
    assert set(explored.tolist()) == {0, 1}


def test_update_schedule_counts_as_fractions_do():
    for per_frame in (fractions.Fraction(1, 4), fractions.Fraction(32, 16 * 4 * 3)):
        schedule = UpdateSchedule(per_frame, 1000)
        for old, new in [(0, 4), (3, 4), (4, 8), (7, 11), (95, 100), (0, 1000)]:
            assert schedule.updates_due(old, new) == int(new * per_frame) - int(old * per_frame)


def test_episode_stats_sum_raw_rewards_per_episode():
    def step(reward, first, last):
        z = np.zeros(2, bool)
        return EnvStep(None, np.array(reward, np.float32), np.array(first), np.array(last), z, z, 2)

    stats = EpisodeStats(2)
    stats.step(step([0.0, 0.0], [True, True], [False, False]))
    stats.step(step([1.0, 2.0], [False, False], [False, True]))  # env 1 ends at 2
    stats.step(step([5.0, 7.0], [False, True], [True, False]))  # env 0 ends at 6; 1 restarts
    stats.step(step([0.5, 0.25], [True, False], [False, False]))
    assert stats.completed == [2.0, 6.0]
    np.testing.assert_array_equal(stats.current, [0.0, 0.25])
