"""Objectives: how a batch becomes per-example losses and new priorities.

One class per kind of target, built from the pure rlax-style functions in losses.py
and chosen by the preset's `distribution` (`OBJECTIVES`). This is where two papers
differ; the learner around it (optimizer, clipping, weights, target copies) is
shared. A new method (REM, an ensemble, R2D1's rescaled n-step loss) is a new class
here, not a branch in the learner.

Every objective is called as `objective(online, target, batch, generator)` with the
online and target networks, a `Batch` of tensors on their device and the learner's
random generator (noisy-net noise, IQN's taus), and returns `LossOutput`. Each
network application draws its own noise and taus, in DQN Zoo's order: online at
s_tm1, target at s_t, then the selector at s_t.
"""

from typing import NamedTuple

import torch

from qzoo import losses


class LossOutput(NamedTuple):
    """Per-example `loss` [B] (before importance weights), new `priorities` [B] for
    prioritized replay, and the online `q_tm1` = Q(s_tm1, a_tm1) [B] for logging."""

    loss: torch.Tensor
    priorities: torch.Tensor
    q_tm1: torch.Tensor


def _q_taken(outputs, a_tm1):
    return outputs.q_values.gather(1, a_tm1[:, None]).squeeze(1)


def _distributional_output(loss, out_tm1, a_tm1):
    """Distributional losses are their own priorities, clipped to [0, 100] (DQN Zoo)."""
    return LossOutput(loss, loss.detach().abs().clamp(0, 100), _q_taken(out_tm1, a_tm1))


class QLearning:
    """Q-learning (Mnih et al. 2015) or double Q-learning (van Hasselt et al. 2016).

    With `grad_error_bound` > 0 the loss is DQN Zoo's: the TD error's gradient is
    clipped to [-bound, bound] and squared (identity forward); else Huber(1).
    Priorities are |TD error| (Schaul et al. 2016).
    """

    def __init__(self, double_q=False, grad_error_bound=0.0):
        self.double_q, self.grad_error_bound = double_q, grad_error_bound

    def __call__(self, online, target, batch, generator):
        out_tm1 = online(batch.s_tm1, generator=generator)
        with torch.no_grad():
            q_t = target(batch.s_t, generator=generator).q_values
            selector = online(batch.s_t, generator=generator).q_values if self.double_q else None
        args = (out_tm1.q_values, batch.a_tm1, batch.r_t, batch.discount_t, q_t)
        if self.double_q:
            td = losses.double_q_learning(*args, selector)
        else:
            td = losses.q_learning(*args)
        if self.grad_error_bound > 0:
            # Identity forward; the gradient into the TD error is clipped. With weights,
            # the effective gradient is clip(w * delta) / B: not Huber x w.
            bound = self.grad_error_bound
            loss = losses.l2_loss(losses.clip_gradient(td, -bound, bound))
        else:
            loss = losses.huber_loss(td)
        return LossOutput(loss, td.detach().abs(), _q_taken(out_tm1, batch.a_tm1))


class CategoricalQLearning:
    """C51 (Bellemare et al. 2017): cross-entropy to the projected target
    distribution; with `double_q`, Rainbow's (Hessel et al. 2018) online selector.
    Priorities are the loss, clipped to [0, 100] (DQN Zoo)."""

    def __init__(self, double_q=False):
        self.double_q = double_q

    def __call__(self, online, target, batch, generator):
        atoms = online.support
        out_tm1 = online(batch.s_tm1, generator=generator)
        with torch.no_grad():
            logits_t = target(batch.s_t, generator=generator).q_logits
            selector = online(batch.s_t, generator=generator).q_values if self.double_q else None
        args = (atoms, out_tm1.q_logits, batch.a_tm1, batch.r_t, batch.discount_t, atoms, logits_t)
        if self.double_q:
            loss = losses.categorical_double_q_learning(*args, selector)
        else:
            loss = losses.categorical_q_learning(*args)
        return _distributional_output(loss, out_tm1, batch.a_tm1)


class QuantileQLearning:
    """QR-DQN (Dabney et al. 2018, arXiv:1710.10044): quantile Huber regression onto
    the target's quantiles at fixed midpoints tau_i = (2i + 1) / 2N. The greedy action
    at s_t comes from the target network, or the online one with `double_q`."""

    def __init__(self, num_quantiles, huber_param, double_q=False):
        self.num_quantiles, self.huber_param, self.double_q = num_quantiles, huber_param, double_q

    def __call__(self, online, target, batch, generator):
        n = self.num_quantiles
        out_tm1 = online(batch.s_tm1, generator=generator)
        with torch.no_grad():
            dist_t = target(batch.s_t, generator=generator).q_dist
            selector = online(batch.s_t, generator=generator).q_dist if self.double_q else dist_t
        taus = (torch.arange(n, device=dist_t.device) + 0.5) / n
        tau_tm1 = taus.expand(len(batch.a_tm1), n)
        loss = losses.quantile_q_learning(
            out_tm1.q_dist, tau_tm1, batch.a_tm1, batch.r_t, batch.discount_t, selector, dist_t,
            self.huber_param,
        )  # fmt: skip
        return _distributional_output(loss, out_tm1, batch.a_tm1)


class ImplicitQuantileQLearning:
    """IQN (Dabney et al. 2018, arXiv:1806.06923): quantile Huber regression at
    sampled taus, N for the online distribution and N' for the target's; the greedy
    action at s_t averages K further samples from the target network (or the online
    one with `double_q`)."""

    def __init__(self, num_tm1, num_t, num_policy, huber_param, double_q=False):
        self.num_tm1, self.num_t, self.num_policy = num_tm1, num_t, num_policy
        self.huber_param, self.double_q = huber_param, double_q

    def __call__(self, online, target, batch, generator):
        size, device = len(batch.a_tm1), batch.s_tm1.device

        def taus(n):
            return torch.rand(size, n, device=device, generator=generator)

        tau_tm1 = taus(self.num_tm1)
        out_tm1 = online(batch.s_tm1, tau_tm1, generator=generator)
        with torch.no_grad():
            dist_t = target(batch.s_t, taus(self.num_t), generator=generator).q_dist
            chooser = online if self.double_q else target
            selector = chooser(batch.s_t, taus(self.num_policy), generator=generator).q_dist
        loss = losses.quantile_q_learning(
            out_tm1.q_dist, tau_tm1, batch.a_tm1, batch.r_t, batch.discount_t, selector, dist_t,
            self.huber_param,
        )  # fmt: skip
        return _distributional_output(loss, out_tm1, batch.a_tm1)


# The preset's `distribution` -> its objective, built from the config.
OBJECTIVES = {
    "none": lambda c: QLearning(c.double_q, c.grad_error_bound),
    "categorical": lambda c: CategoricalQLearning(c.double_q),
    "quantile": lambda c: QuantileQLearning(c.num_quantiles, c.huber_param, c.double_q),
    "implicit_quantile": lambda c: ImplicitQuantileQLearning(
        c.tau_samples_s_tm1, c.tau_samples_s_t, c.tau_samples_policy, c.huber_param, c.double_q
    ),
}


def make_objective(config):
    """The objective for `config.distribution`; an unknown one is an error, never a
    fallback."""
    if config.distribution not in OBJECTIVES:
        raise ValueError(
            f"no objective for distribution {config.distribution!r}; "
            f"expected one of {', '.join(OBJECTIVES)}"
        )
    return OBJECTIVES[config.distribution](config)
