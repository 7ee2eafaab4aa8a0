"""Multi-head Q-networks, Ensemble-DQN and REM (Agarwal et al. 2020, arXiv:1907.04543)
and CQL's regularizer (Kumar et al. 2020, arXiv:2006.04779): losses against numbers
worked out by hand, objectives against those losses, networks' shapes and layout."""

import math

import numpy as np
import pytest
import torch

from qzoo.configuration import make_config
from qzoo.envs import EnvInfo
from qzoo.learning import losses
from qzoo.learning.from_config import make_objective
from qzoo.learning.objectives import (
    EnsembleQLearning,
    QLearning,
    QuantileQLearning,
    REMQLearning,
)
from qzoo.networks.heads import NetworkOutputs, mix_heads, random_convex_combination
from qzoo.networks.network import SeparateNetworks, make_network
from qzoo.replay import Batch

# One example, two actions, two heads: q[b, a, k].
# Head 0: Q(s_tm1) = [1, 2], Q(s_t) = [2, 5]. Head 1: Q(s_tm1) = [3, 0], Q(s_t) = [4, 1].
Q_TM1 = torch.tensor([[[1.0, 3.0], [2.0, 0.0]]])
Q_T = torch.tensor([[[2.0, 4.0], [5.0, 1.0]]])
A, R, DISCOUNT = torch.tensor([0]), torch.tensor([1.0]), torch.tensor([0.5])


def test_multi_head_q_learning_gives_every_head_its_own_target():
    td = losses.multi_head_q_learning(Q_TM1, A, R, DISCOUNT, Q_T)
    # head 0: 1 + 0.5 * max(2, 5) - 1 = 2.5 ; head 1: 1 + 0.5 * max(4, 1) - 3 = 0
    assert td.tolist() == [[2.5, 0.0]]
    # Double Q per head: a selector preferring action 0 for head 0 and 1 for head 1.
    selector = torch.tensor([[[9.0, 0.0], [0.0, 9.0]]])
    td = losses.multi_head_q_learning(Q_TM1, A, R, DISCOUNT, Q_T, selector)
    # head 0: 1 + 0.5 * 2 - 1 = 1 ; head 1: 1 + 0.5 * 1 - 3 = -1.5
    assert td.tolist() == [[1.0, -1.5]]


def test_multi_head_q_learning_keeps_examples_and_heads_apart():
    torch.manual_seed(0)
    q_tm1, q_t = torch.randn(5, 3, 4), torch.randn(5, 3, 4)
    a, r, d = torch.randint(3, (5,)), torch.randn(5), torch.rand(5)
    td = losses.multi_head_q_learning(q_tm1, a, r, d, q_t)
    for k in range(4):
        torch.testing.assert_close(td[:, k], losses.q_learning(q_tm1[..., k], a, r, d, q_t[..., k]))


def test_rem_targets_the_max_of_the_mixture_not_the_mixture_of_maxes():
    alpha = torch.tensor([0.25, 0.75])
    td = losses.rem_q_learning(Q_TM1, A, R, DISCOUNT, Q_T, alpha)
    # Q_alpha(s_tm1) = 0.25 [1, 2] + 0.75 [3, 0] = [2.5, 0.5]
    # Q_alpha(s_t)   = 0.25 [2, 5] + 0.75 [4, 1] = [3.5, 2.0] -> max 3.5
    # (the mixture of each head's max would be 0.25 * 5 + 0.75 * 4 = 4.25)
    # td = 1 + 0.5 * 3.5 - 2.5 = 0.25
    assert td.tolist() == pytest.approx([0.25])
    # Double Q: a selector whose mixture prefers action 1: 1 + 0.5 * 2.0 - 2.5 = -0.5.
    selector = torch.tensor([[[0.0, 0.0], [1.0, 1.0]]])
    td = losses.rem_q_learning(Q_TM1, A, R, DISCOUNT, Q_T, alpha, selector)
    assert td.tolist() == pytest.approx([-0.5])


def test_rem_gradient_reaches_each_head_in_proportion_to_its_weight():
    q_tm1 = Q_TM1.clone().requires_grad_(True)
    td = losses.rem_q_learning(q_tm1, A, R, DISCOUNT, Q_T, torch.tensor([0.25, 0.75]))
    losses.huber_loss(td).sum().backward()
    # d Huber(0.25) / d td = 0.25; d td / d q_tm1[0, 0, k] = -alpha_k.
    torch.testing.assert_close(q_tm1.grad, torch.tensor([[[-0.0625, -0.1875], [0.0, 0.0]]]))


def test_cql_regularizer_worked_by_hand():
    q = torch.tensor([[1.0, 1.0], [0.0, math.log(3.0)]], requires_grad=True)
    penalty = losses.cql_regularizer(q, torch.tensor([0, 1]))
    # logsumexp(1, 1) - 1 = log 2 ; logsumexp(0, log 3) - log 3 = log 4 - log 3
    assert penalty.tolist() == pytest.approx([math.log(2), math.log(4 / 3)])
    penalty.sum().backward()
    # softmax(q) - onehot(a): [0.5 - 1, 0.5] and [0.25, 0.75 - 1]
    torch.testing.assert_close(q.grad, torch.tensor([[-0.5, 0.5], [0.25, -0.25]]))
    # Extra dimensions (heads) are kept: head 0 of Q_TM1 is [1, 2], head 1 is [3, 0].
    per_head = losses.cql_regularizer(Q_TM1, A)
    expected = [math.log(math.e + math.e**2) - 1, math.log(math.e**3 + 1) - 3]
    torch.testing.assert_close(per_head, torch.tensor([expected]))


def test_random_convex_combination_is_uniform_over_its_l1_norm():
    alpha = random_convex_combination(200, generator=torch.Generator().manual_seed(3))
    u = torch.rand(200, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(alpha, u / u.sum())
    assert (alpha >= 0).all() and alpha.sum().item() == pytest.approx(1.0)
    per_env = random_convex_combination(4, size=(3,))
    assert per_env.shape == (3, 4)
    torch.testing.assert_close(per_env.sum(-1), torch.ones(3))


def test_mix_heads_one_mixture_or_one_per_row():
    q_heads = torch.tensor([[[1.0, 3.0], [2.0, 0.0]], [[1.0, 3.0], [2.0, 0.0]]])
    one = mix_heads(q_heads, torch.tensor([0.25, 0.75]))
    assert one.tolist() == [[2.5, 0.5], [2.5, 0.5]]
    rows = mix_heads(q_heads, torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    assert rows.tolist() == [[1.0, 2.0], [3.0, 0.0]]


class FixedNetwork(torch.nn.Module):
    """Returns given heads [B, A, K]; records how often it was called."""

    def __init__(self, q_heads):
        super().__init__()
        self.q_heads = torch.nn.Parameter(q_heads.clone())
        self.calls = 0

    def forward(self, obs, taus=None, generator=None):
        self.calls += 1
        return NetworkOutputs(self.q_heads.mean(-1), None, None, self.q_heads)


def fixed_batch(size=1):
    return Batch(
        s_tm1=np.zeros((size, 1), np.float32), a_tm1=np.zeros(size, np.int64),
        r_t=np.ones(size, np.float32), discount_t=np.full(size, 0.5, np.float32),
        s_t=np.zeros((size, 1), np.float32),
    ).to("cpu")  # fmt: skip


def test_rem_objective_draws_one_alpha_per_batch_shared_by_online_and_target():
    online, target = FixedNetwork(Q_TM1), FixedNetwork(Q_T)
    generator = torch.Generator().manual_seed(7)
    twin = torch.Generator().set_state(generator.get_state())
    out = REMQLearning(2)(online, target, fixed_batch(), generator)
    alpha = random_convex_combination(2, generator=twin)  # the objective's one draw
    td = losses.rem_q_learning(Q_TM1, A, R, DISCOUNT, Q_T, alpha)
    torch.testing.assert_close(out.loss, losses.huber_loss(td).detach())
    torch.testing.assert_close(out.priorities, td.abs())
    assert torch.equal(generator.get_state(), twin.get_state())  # nothing else drawn
    # The logged Q is the plain mean of the heads (what acting uses), not the mixture.
    assert out.q_tm1.tolist() == [2.0]
    # A new batch, a new alpha.
    again = REMQLearning(2)(online, target, fixed_batch(), generator)
    assert again.loss.item() != out.loss.item()


def test_ensemble_objective_averages_each_heads_huber_loss():
    online, target = FixedNetwork(Q_TM1), FixedNetwork(Q_T)
    out = EnsembleQLearning()(online, target, fixed_batch(), None)
    # TD errors 2.5 and 0: Huber 2.0 and 0, mean over heads 1.0; priority mean |td| 1.25.
    assert out.loss.tolist() == [1.0] and out.priorities.tolist() == [1.25]
    out.loss.sum().backward()
    # Each head's own gradient, / 2 heads: head 0 at action 0: -1 / 2 (Huber's slope 1).
    assert online.q_heads.grad.tolist() == [[[-0.5, 0.0], [0.0, 0.0]]]
    # DQN Zoo's TD-error clip: 0.5 td^2 forward, (0.5 * 2.5^2 + 0) / 2 = 1.5625; each
    # head's gradient clipped to 1/32, then / 2 heads (so the clip sees 1/64).
    online.q_heads.grad = None
    clipped = EnsembleQLearning(grad_error_bound=1 / 32)(online, target, fixed_batch(), None)
    assert clipped.loss.tolist() == [1.5625]
    clipped.loss.sum().backward()
    assert online.q_heads.grad.tolist() == [[[-1 / 64, 0.0], [0.0, 0.0]]]


def test_cql_adds_alpha_times_the_regularizer_to_every_objective():
    online, target = FixedNetwork(Q_TM1), FixedNetwork(Q_T)
    batch = fixed_batch()
    head0, head1 = math.log(math.e + math.e**2) - 1, math.log(math.e**3 + 1) - 3
    plain = EnsembleQLearning()(online, target, batch, None).loss
    with_cql = EnsembleQLearning(cql_alpha=0.5)(online, target, batch, None).loss
    assert (with_cql - plain).item() == pytest.approx(0.5 * (head0 + head1) / 2)
    # One head: CQL on the network's Q-values (here the mean of the two heads [2, 1]).
    plain = QLearning()(online, target, batch, None)
    with_cql = QLearning(cql_alpha=2.0)(online, target, batch, None)
    assert (with_cql.loss - plain.loss).item() == pytest.approx(
        2 * (math.log(math.e**2 + math.e) - 2)
    )
    assert torch.equal(with_cql.priorities, plain.priorities)  # priorities stay |td|
    # REM: on the mixed Q-values, with the objective's alpha.
    generator = torch.Generator().manual_seed(1)
    twin = torch.Generator().set_state(generator.get_state())
    rem = REMQLearning(2, cql_alpha=1.0)(online, target, batch, generator).loss
    alpha = random_convex_combination(2, generator=twin)
    td = losses.rem_q_learning(Q_TM1, A, R, DISCOUNT, Q_T, alpha)
    mixed = mix_heads(Q_TM1, alpha)
    expected = losses.huber_loss(td) + losses.cql_regularizer(mixed, A)
    torch.testing.assert_close(rem.detach(), expected)


def test_cql_on_quantiles_uses_the_mean_over_quantiles_with_its_gradient():
    # One example, two quantiles, two actions: dist [B, N, A]; means [1, 3].
    dist = torch.tensor([[[0.0, 2.0], [2.0, 4.0]]])

    class Quantiles(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.dist = torch.nn.Parameter(dist.clone())

        def forward(self, obs, taus=None, generator=None):
            return NetworkOutputs(self.dist.mean(1).detach(), None, self.dist)

    online, target, batch = Quantiles(), Quantiles(), fixed_batch()
    plain = QuantileQLearning(2, 1.0)(online, target, batch, None)
    with_cql = QuantileQLearning(2, 1.0, cql_alpha=1.0)(online, target, batch, None)
    # logsumexp(1, 3) - 1 = log(e + e^3) - 1
    assert (with_cql.loss - plain.loss).item() == pytest.approx(math.log(math.e + math.e**3) - 1)
    assert torch.equal(with_cql.priorities, plain.priorities)
    online.dist.grad = None
    (with_cql.loss - plain.loss).sum().backward()
    # d/d dist[n, a] = (softmax([1, 3]) - onehot(0))[a] / N
    p = 1 / (1 + math.e**2)
    torch.testing.assert_close(online.dist.grad[0], torch.tensor([[(p - 1) / 2, (1 - p) / 2]] * 2))


PONG = EnvInfo("pong", "atari", 6, (84, 84), np.uint8, "pong")
CARTPOLE = EnvInfo("CartPole-v1", "gym", 2, (4,), np.float32, "CartPole-v1")


def test_multi_head_network_is_action_major_and_acts_on_the_mean():
    config = make_config("dqn", "CartPole-v1", "gym", {"num_heads": 3})
    net = make_network(config, CARTPOLE, (4,))
    last = net.head.net[-1]
    assert last.out_features == 2 * 3  # A x K units
    out = net(torch.randn(5, 4))
    assert out.q_heads.shape == (5, 2, 3)
    # Unit a * K + k is head k of action a (batch_rl's reshape to [B, A, K]).
    features = torch.relu(net.head.net[0](net.torso(torch.ones(1, 4))))
    units = last(features)[0]
    heads = net(torch.ones(1, 4)).q_heads[0]
    torch.testing.assert_close(heads[1, 2], units[1 * 3 + 2])
    torch.testing.assert_close(out.q_values, out.q_heads.mean(-1))
    assert out.q_values.requires_grad
    # Pong with batch_rl's 200 heads: a last layer of 512 x (6 x 200) units.
    pong = make_config("dqn", "pong", "atari", {"num_heads": 200})
    assert make_network(pong, PONG, (4, 84, 84)).head.net[-1].weight.shape == (1200, 512)


def test_separate_networks_stack_their_q_values_into_heads():
    heads = {"num_heads": 4, "separate_networks": True, "head_mixing": "stochastic"}
    config = make_config("dqn", "CartPole-v1", "gym", heads)
    net = make_network(config, CARTPOLE, (4,))
    assert isinstance(net, SeparateNetworks) and len(net.members) == 4
    assert net.kind == "none"
    obs = torch.randn(5, 4)
    out = net(obs)
    assert out.q_heads.shape == (5, 2, 4)
    for k, member in enumerate(net.members):
        torch.testing.assert_close(out.q_heads[..., k], member(obs).q_values)
    torch.testing.assert_close(out.q_values, out.q_heads.mean(-1))
    # Separately initialized: no two members are equal.
    first = [m.head.net[-1].weight for m in net.members]
    assert not any(torch.equal(first[0], w) for w in first[1:])
    # The REM objective trains all four.
    objective = make_objective(config)
    assert isinstance(objective, REMQLearning) and objective.num_heads == 4


class _FixedHeads(torch.nn.Module):
    """A 'network' whose heads are given: q_heads [N, A, K] whatever the input."""

    kind = "none"

    def __init__(self, q_heads):
        super().__init__()
        self.q_heads = torch.nn.Parameter(q_heads, requires_grad=False)

    def forward(self, obs, taus=None, generator=None):
        return NetworkOutputs(self.q_heads.mean(-1), None, None, self.q_heads)


def test_deep_exploration_keeps_one_mixture_per_episode_and_env():
    from qzoo.acting.policy import Policy

    # 3 envs, 2 actions, 4 heads: head k prefers action k % 2 by a margin k + 1.
    q_heads = torch.zeros(3, 2, 4)
    for k in range(4):
        q_heads[:, k % 2, k] = k + 1.0
    generator = torch.Generator().manual_seed(0)
    greedy = np.zeros(3, np.float32)
    policy = Policy(_FixedHeads(q_heads), 32, deep_exploration="stochastic")
    policy.observe(np.ones(3, bool), np.zeros(3))
    policy(np.zeros((3, 1)), greedy, generator)
    w0 = policy._episode_weights.clone()
    np.testing.assert_allclose(w0.sum(1).numpy(), 1.0, rtol=1e-6)
    assert (w0 > 0).all() and len(set(map(tuple, w0.tolist()))) == 3  # one per env
    # Mid-episode: the same mixture; env 1 starts a new episode: only its row changes.
    policy.observe(np.zeros(3, bool), np.zeros(3))
    policy(np.zeros((3, 1)), greedy, generator)
    assert torch.equal(policy._episode_weights, w0)
    policy.observe(np.array([False, True, False]), np.zeros(3))
    actions, _ = policy(np.zeros((3, 1)), greedy, generator)
    w1 = policy._episode_weights
    assert torch.equal(w1[[0, 2]], w0[[0, 2]]) and not torch.equal(w1[1], w0[1])
    # Greedy on the episode's mixture: action 1 iff heads 1 and 3 outweigh 0 and 2.
    mixed = (w1 * torch.tensor([1.0, 2.0, 3.0, 4.0])).numpy()
    np.testing.assert_array_equal(actions, (mixed[:, 1] + mixed[:, 3] > mixed[:, 0] + mixed[:, 2]))


def test_deep_exploration_identity_acts_on_one_random_head():
    from qzoo.acting.policy import Policy

    q_heads = torch.zeros(64, 2, 2)
    q_heads[:, 0, 0] = 1.0  # head 0 picks action 0, head 1 picks action 1
    q_heads[:, 1, 1] = 1.0
    policy = Policy(_FixedHeads(q_heads), 32, deep_exploration="identity")
    generator = torch.Generator().manual_seed(1)
    policy.observe(np.ones(64, bool), np.zeros(64))
    actions, _ = policy(np.zeros((64, 1)), np.zeros(64, np.float32), generator)
    heads = policy._episode_weights.argmax(1).numpy()
    assert set(policy._episode_weights.sum(1).tolist()) == {1.0}  # one-hot
    np.testing.assert_array_equal(actions, heads)  # each env acts on its own head
    assert 16 < heads.sum() < 48  # both heads drawn (binomial(64, 1/2))
    # Without deep exploration the policy acts on the heads' mean (a tie: either).
    plain = Policy(_FixedHeads(q_heads), 32)
    assert plain._episode_weights is None
