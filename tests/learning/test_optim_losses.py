"""Optimizer and TD losses against numbers worked out by hand."""

import math

import pytest
import torch

from qzoo.learning import losses
from qzoo.learning.optim import AdamTF1, CenteredRMSProp, clip_by_global_norm_


def test_centered_rmsprop_eps_inside_the_square_root():
    # decay 0.95, eps 0.01, lr 0.1; gradients 2 then -1, from theta = 1.
    # step 1: nu = 0.2, mu = 0.1, theta = 1 - 0.1 * 2 / sqrt(0.2 - 0.01 + 0.01)
    # step 2: nu = 0.24, mu = 0.045, theta += 0.1 / sqrt(0.24 - 0.045^2 + 0.01)
    theta = torch.nn.Parameter(torch.tensor([1.0], dtype=torch.float64))
    opt = CenteredRMSProp([theta], lr=0.1, decay=0.95, eps=0.01)
    expected = [1 - 0.2 / math.sqrt(0.2), None]
    expected[1] = expected[0] + 0.1 / math.sqrt(0.24 - 0.045**2 + 0.01)
    for grad, want in zip((2.0, -1.0), expected):
        theta.grad = torch.tensor([grad], dtype=torch.float64)
        opt.step()
        assert theta.item() == pytest.approx(want, abs=1e-12)
    assert expected == pytest.approx([0.5527864045, 0.7536013587], abs=1e-9)


def test_tf1_rmsprop_starts_the_mean_square_at_one():
    # Dopamine's TF1 RMSPropOptimizer: decay 0.95, eps 0.01, lr 0.1, gradient 2 from 1.
    # nu = 0.95 * 1 + 0.05 * 4 = 1.15, mu = 0.1: theta = 1 - 0.2 / sqrt(1.15 - 0.01 + 0.01)
    theta = torch.nn.Parameter(torch.tensor([1.0], dtype=torch.float64))
    opt = CenteredRMSProp([theta], lr=0.1, decay=0.95, eps=0.01, initial_nu=1.0)
    theta.grad = torch.tensor([2.0], dtype=torch.float64)
    opt.step()
    assert theta.item() == pytest.approx(0.8134990384, abs=1e-9)


def test_tf1_adam_adds_epsilon_hat_before_the_bias_correction():
    # lr 0.1, eps 0.01, betas (0.9, 0.999); gradients 2 then -1, from theta = 1.
    # t = 1: m = 0.2, v = 0.004, lr_t = 0.1 sqrt(0.001) / 0.1:
    #   theta = 1 - lr_t * 0.2 / (sqrt(0.004) + 0.01) = 0.9136527059
    # t = 2: m = 0.08, v = 0.004996, lr_t = 0.1 sqrt(1 - 0.999^2) / (1 - 0.9^2):
    #   theta -= lr_t * 0.08 / (sqrt(0.004996) + 0.01) -> 0.8903200575
    # (PyTorch's Adam with eps 0.01 gives 1 - 0.2 / (2 + 0.01) = 0.9005 at t = 1.)
    theta = torch.nn.Parameter(torch.tensor([1.0], dtype=torch.float64))
    opt = AdamTF1([theta], lr=0.1, eps=0.01)
    for grad, want in zip((2.0, -1.0), (0.9136527059, 0.8903200575)):
        theta.grad = torch.tensor([grad], dtype=torch.float64)
        opt.step()
        assert theta.item() == pytest.approx(want, abs=1e-9)
    # The step count lives in the optimizer's state: a reloaded optimizer continues it.
    again = AdamTF1([theta], lr=0.1, eps=0.01)
    again.load_state_dict(opt.state_dict())
    theta.grad = torch.tensor([0.5], dtype=torch.float64)
    again.step()  # the third step: PyTorch's eps = eps_hat / sqrt(1 - 0.999^3)
    assert again.param_groups[0]["eps"] == pytest.approx(0.01 / math.sqrt(1 - 0.999**3))


def test_torch_rmsprop_differs_from_dqn_zoo():
    theta = torch.nn.Parameter(torch.tensor([1.0], dtype=torch.float64))
    opt = torch.optim.RMSprop([theta], lr=0.1, alpha=0.95, eps=0.01, centered=True)
    theta.grad = torch.tensor([2.0], dtype=torch.float64)
    opt.step()
    assert theta.item() != pytest.approx(0.5527864045, abs=1e-4)


def test_clip_by_global_norm_has_no_epsilon():
    p = torch.nn.Parameter(torch.zeros(2))
    p.grad = torch.tensor([3.0, 4.0])
    norm = clip_by_global_norm_([p], 1.0)
    assert norm.item() == pytest.approx(5.0)
    assert p.grad.tolist() == pytest.approx([0.6, 0.8], abs=1e-7)
    p.grad = torch.tensor([3.0, 4.0])
    clip_by_global_norm_([p], 10.0)
    assert p.grad.tolist() == [3.0, 4.0]


def test_q_learning():
    q_tm1 = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    q_t = torch.tensor([[2.0, 5.0], [1.0, 0.0]])
    td = losses.q_learning(
        q_tm1, torch.tensor([0, 1]), torch.tensor([1.0, -1.0]), torch.tensor([0.5, 0.0]), q_t
    )
    # 1 + 0.5 * max(2, 5) - 1 = 2.5 ; -1 + 0 - 4 = -5
    assert td.tolist() == [2.5, -5.0]


def test_double_q_learning_selects_with_one_net_and_values_with_the_other():
    q_tm1 = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    q_t_value = torch.tensor([[2.0, 5.0], [1.0, 0.0]])
    q_t_selector = torch.tensor([[9.0, 0.0], [0.0, 9.0]])
    td = losses.double_q_learning(
        q_tm1, torch.tensor([0, 1]), torch.tensor([1.0, -1.0]), torch.tensor([0.5, 1.0]),
        q_t_value, q_t_selector,
    )  # fmt: skip
    # selector picks actions 0 and 1: 1 + 0.5 * 2 - 1 = 1 ; -1 + 1 * 0 - 4 = -5
    assert td.tolist() == [1.0, -5.0]


def test_target_carries_no_gradient():
    q_tm1 = torch.tensor([[1.0, 2.0]], requires_grad=True)
    q_t = torch.tensor([[2.0, 5.0]], requires_grad=True)
    td = losses.q_learning(q_tm1, torch.tensor([1]), torch.tensor([0.0]), torch.tensor([1.0]), q_t)
    td.sum().backward()
    assert q_t.grad is None and q_tm1.grad.tolist() == [[0.0, -1.0]]


def test_clip_gradient_with_l2_equals_huber_over_a_batch_of_32():
    delta = torch.linspace(-3, 3, 32)
    x1 = delta.clone().requires_grad_(True)
    losses.l2_loss(losses.clip_gradient(x1, -1 / 32, 1 / 32)).mean().backward()
    x2 = delta.clone().requires_grad_(True)
    losses.huber_loss(x2, 1.0).mean().backward()
    torch.testing.assert_close(x1.grad, x2.grad)
    assert x1.grad.abs().max().item() == pytest.approx(1 / 32)


def test_huber_loss_values():
    values = losses.huber_loss(torch.tensor([0.5, -2.0, 3.0]), 1.0)
    assert values.tolist() == pytest.approx([0.125, 1.5, 2.5])
