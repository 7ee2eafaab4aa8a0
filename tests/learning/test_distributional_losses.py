"""Categorical and quantile losses against numbers worked out by hand."""

import math

import pytest
import torch

from qzoo.learning import losses

Z = torch.tensor([0.0, 1.0, 2.0])


def project(atoms, probs):
    return losses.categorical_l2_project(torch.tensor([atoms]), torch.tensor([probs]), Z)[0]


def test_projection_splits_atoms_between_neighbours():
    # Atoms 0.5, 1.5, 2.5 -> 0.5 splits 50/50 on {0, 1}, 1.5 on {1, 2}, 2.5 clips to 2.
    result = project([0.5, 1.5, 2.5], [0.2, 0.3, 0.5])
    assert result.tolist() == pytest.approx([0.1, 0.25, 0.65])


def test_projection_of_atoms_outside_the_support():
    assert project([-5.0, -3.0, -1.0], [0.2, 0.3, 0.5]).tolist() == pytest.approx([1, 0, 0])
    assert project([3.0, 7.0, 9.0], [0.2, 0.3, 0.5]).tolist() == pytest.approx([0, 0, 1])


def test_projection_with_discount_zero_collapses_onto_the_reward():
    # discount 0: every target atom is r = 1.2 -> 0.8 on atom 1, 0.2 on atom 2.
    target_z = torch.full((1, 3), 1.2)
    result = losses.categorical_l2_project(target_z, torch.tensor([[0.2, 0.3, 0.5]]), Z)[0]
    assert result.tolist() == pytest.approx([0.0, 0.8, 0.2])


def test_projection_of_several_atoms_onto_one():
    result = project([1.0, 1.0, 2.0], [0.25, 0.25, 0.5])
    assert result.tolist() == pytest.approx([0.0, 0.5, 0.5])


def test_projection_with_equal_support_atoms_does_not_divide_by_zero():
    z_q = torch.tensor([0.0, 1.0, 1.0, 2.0])
    result = losses.categorical_l2_project(torch.tensor([[0.5]]), torch.tensor([[1.0]]), z_q)
    assert torch.isfinite(result).all()


def test_categorical_q_learning_worked_by_hand():
    # Target net at s_t: action 1 has the larger mean, and its distribution is a point
    # mass on atom 2. r = 0.5, discount 0.5: target atoms 0.5, 1.0, 1.5 -> all mass at
    # 1.5 -> 0.5 on atom 1 and 0.5 on atom 2.
    q_logits_t = torch.tensor([[[0.0, 0.0, 0.0], [-1e9, -1e9, 0.0]]])
    q_logits_tm1 = torch.tensor([[[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]])
    loss = losses.categorical_q_learning(
        Z, q_logits_tm1, torch.tensor([0]), torch.tensor([0.5]), torch.tensor([0.5]), Z,
        q_logits_t,
    )  # fmt: skip
    # Online logits of action 0 are uniform: cross-entropy = log 3.
    assert loss.item() == pytest.approx(math.log(3))


def test_categorical_double_q_uses_the_selector():
    q_logits_t = torch.tensor([[[0.0, -1e9, -1e9], [-1e9, -1e9, 0.0]]])  # a0 at 0, a1 at 2
    q_logits_tm1 = torch.log(torch.tensor([[[0.5, 0.25, 0.25], [1 / 3, 1 / 3, 1 / 3]]]))
    args = (Z, q_logits_tm1, torch.tensor([0]), torch.tensor([0.0]), torch.tensor([1.0]), Z)
    # The selector prefers action 0 (point mass on 0): the target is [1, 0, 0].
    loss = losses.categorical_double_q_learning(*args, q_logits_t, torch.tensor([[1.0, 0.0]]))
    assert loss.item() == pytest.approx(-math.log(0.5))
    # C51 (no selector) picks action 1 (mean 2): the target is [0, 0, 1].
    assert losses.categorical_q_learning(*args, q_logits_t).item() == pytest.approx(-math.log(0.25))
    loss = losses.categorical_double_q_learning(*args, q_logits_t, torch.tensor([[0.0, 1.0]]))
    assert loss.item() == pytest.approx(-math.log(0.25))


def test_categorical_gradient_flows_only_into_online_logits():
    q_logits_tm1 = torch.zeros(2, 2, 3, requires_grad=True)
    q_logits_t = torch.zeros(2, 2, 3, requires_grad=True)
    loss = losses.categorical_q_learning(
        Z, q_logits_tm1, torch.tensor([0, 1]), torch.tensor([0.0, 1.0]), torch.tensor([0.9, 0.0]),
        Z, q_logits_t,
    )  # fmt: skip
    loss.sum().backward()
    assert q_logits_t.grad is None and q_logits_tm1.grad.abs().sum() > 0


def test_quantile_regression_loss_worked_by_hand():
    src, tau, target = (
        torch.tensor([[0.0, 1.0]]),
        torch.tensor([[0.25, 0.75]]),
        torch.tensor([[0.5]]),
    )
    # delta = [0.5, -0.5]; weights |0.25 - 0| = 0.25 and |0.75 - 1| = 0.25.
    assert losses.quantile_regression_loss(src, tau, target).item() == pytest.approx(0.25)
    # Huber(1) of 0.5 is 0.125: 2 * 0.25 * 0.125.
    assert losses.quantile_regression_loss(src, tau, target, 1.0).item() == pytest.approx(0.0625)
    # Two target samples are averaged, source quantiles summed.
    two = torch.tensor([[0.5, 0.5]])
    assert losses.quantile_regression_loss(src, tau, two, 1.0).item() == pytest.approx(0.0625)


def test_quantile_regression_gradient_worked_by_hand():
    """d/d src_i = -mean_j w_ij * dL/d delta_ij; the target gets no gradient."""
    src = torch.tensor([[0.0, 1.0]], requires_grad=True)
    target = torch.tensor([[3.0, 0.5]], requires_grad=True)
    tau = torch.tensor([[0.25, 0.75]])
    losses.quantile_regression_loss(src, tau, target, 1.0).sum().backward()
    # src 0: deltas 3 (Huber slope 1, w 0.25), 0.5 (slope 0.5, w 0.25):
    #   -(0.25 * 1 + 0.25 * 0.5) / 2 = -0.1875.
    # src 1: deltas 2 (slope 1, w 0.75), -0.5 (slope -0.5, w |0.75 - 1| = 0.25):
    #   -(0.75 * 1 - 0.25 * 0.5) / 2 = -0.3125.
    assert src.grad[0].tolist() == pytest.approx([-0.1875, -0.3125])
    assert target.grad is None
    src.grad = None
    losses.quantile_regression_loss(src, tau, target).sum().backward()  # |delta|
    # src 0: -(0.25 + 0.25) / 2; src 1: -(0.75 - 0.25) / 2.
    assert src.grad[0].tolist() == pytest.approx([-0.25, -0.25])


def test_quantile_q_learning_selects_by_the_mean_of_the_selector():
    # Two quantiles, two actions. Selector means: action 0 -> 1, action 1 -> 3.
    selector = torch.tensor([[[0.0, 2.0], [2.0, 4.0]]])  # [B, N', A]
    dist_q_t = torch.tensor([[[10.0, 1.0], [10.0, 1.0]]])
    dist_q_tm1 = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])
    tau = torch.tensor([[0.25, 0.75]])
    loss = losses.quantile_q_learning(
        dist_q_tm1, tau, torch.tensor([0]), torch.tensor([0.0]), torch.tensor([1.0]),
        selector, dist_q_t,
    )  # fmt: skip
    # Target = dist_q_t[:, a=1] = [1, 1]; sources are [1, 1]: zero error.
    assert loss.item() == pytest.approx(0.0)


def test_evenly_spaced_projection_equals_the_general_kernel():
    torch.manual_seed(0)
    support = torch.linspace(-10, 10, 51)
    z_p = torch.randn(64, 51) * 8  # many atoms outside [-10, 10] too
    z_p[0] = 3.2  # discount 0: all atoms on one value
    z_p[1] = support  # atoms exactly on the support
    probs = torch.softmax(torch.randn(64, 51), -1)
    fast = losses.categorical_l2_project(z_p, probs, support)
    general = losses._project_general(z_p, probs, support)
    torch.testing.assert_close(fast, general, atol=1e-6, rtol=0)
    torch.testing.assert_close(fast.sum(1), torch.ones(64))
