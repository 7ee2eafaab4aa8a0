"""Objectives: how a batch becomes per-example losses and new priorities.

One class per kind of target, built from the pure rlax-style functions in losses.py
and chosen by the preset's `distribution` and, with several Q heads, their
`head_mixing` (learning/from_config.py's `OBJECTIVES`, keyed by `objective_key`). This is where two papers
differ; the learner around it (optimizer, clipping, weights, target copies) is
shared. A new method (R2D1's rescaled n-step loss, ...) is a new class here, not a
branch in the learner. Every objective takes CQL's regularizer (Kumar et al. 2020) on
its Q-values, weighted by `cql_alpha` (0: off).

Every objective is called as `objective(online, target, batch, generator)` with the
online and target networks, a `Batch` of tensors on their device and the learner's
random generator (noisy-net noise, IQN's taus), and returns `LossOutput`. Each
network application draws its own noise and taus, in DQN Zoo's order: online at
s_tm1, target at s_t, then the selector at s_t (REM draws its mixture first).
"""

from typing import Any, NamedTuple, Protocol, cast

import torch
from torch import nn

from qzoo.learning import losses
from qzoo.networks.draws import uniform
from qzoo.networks.heads import mix_heads, random_convex_combination


class LossOutput(NamedTuple):
    """Per-example `loss` [B] (before importance weights), new `priorities` [B] for
    prioritized replay, and the online `q_tm1` = Q(s_tm1, a_tm1) [B] for logging."""

    loss: torch.Tensor
    priorities: torch.Tensor
    q_tm1: torch.Tensor


class Objective(Protocol):
    """What an objective is to the learner (the module docstring)."""

    def __call__(self, online: nn.Module, target: nn.Module, batch: Any,
                 generator: Any) -> LossOutput: ...  # fmt: skip


def _q_taken(outputs, a_tm1):
    return outputs.q_values.gather(1, a_tm1[:, None]).squeeze(1)


def _distributional_output(loss, out_tm1, a_tm1, cql):
    """Distributional losses are their own priorities, clipped to [0, 100] (DQN Zoo);
    CQL's term `cql` [B] (or 0) adds to the loss, not to the priorities."""
    priorities = loss.detach().abs().clamp(0, 100)
    return LossOutput(loss + cql, priorities, _q_taken(out_tm1, a_tm1))


def _cql(alpha, q_tm1, a_tm1):
    """alpha x CQL's regularizer on Q-values that carry the gradient [B, A, ...], or 0."""
    return alpha * losses.cql_regularizer(q_tm1, a_tm1) if alpha > 0 else 0.0


def _td_loss(td, grad_error_bound):
    """DQN Zoo's loss with `grad_error_bound` > 0: the TD error's gradient is clipped to
    [-bound, bound] and squared (identity forward); with weights, the effective gradient
    is clip(w * delta) / B, not Huber x w. Else Huber(1), Dopamine's and batch_rl's."""
    if grad_error_bound > 0:
        bound = grad_error_bound
        return losses.l2_loss(losses.clip_gradient(td, -bound, bound))
    return losses.huber_loss(td)


def target_at_s_t(target, batch, generator):
    """The target network's outputs at s_t."""
    return target(batch.s_t, generator=generator)


def _forward(online, target, batch, generator, target_field, selector_field, double_q):
    """The online network's outputs at s_tm1 (with gradients), the target network's
    `target_field` at s_t and, for double Q, the online network's `selector_field` at
    s_t (without gradients; None otherwise), in that order of random draws."""
    out_tm1 = online(batch.s_tm1, generator=generator)
    with torch.no_grad():
        value_t = getattr(target_at_s_t(target, batch, generator), target_field)
        selector = None
        if double_q:
            selector = getattr(online(batch.s_t, generator=generator), selector_field)
    return out_tm1, value_t, selector


class QLearning:
    """Q-learning (Mnih et al. 2015) or double Q-learning (van Hasselt et al. 2016).

    The TD error's loss is `_td_loss`'s. Priorities are |TD error| (Schaul et al. 2016).
    """

    def __init__(self, double_q=False, grad_error_bound=0.0, cql_alpha=0.0):
        self.double_q, self.grad_error_bound = double_q, grad_error_bound
        self.cql_alpha = cql_alpha

    def __call__(self, online: nn.Module, target: nn.Module, batch: Any,
                 generator: Any) -> LossOutput:  # fmt: skip
        out_tm1, q_t, selector = _forward(online, target, batch, generator, "q_values",
                                          "q_values", self.double_q)  # fmt: skip
        args = (out_tm1.q_values, batch.a_tm1, batch.r_t, batch.discount_t, q_t)
        if self.double_q:
            td = losses.double_q_learning(*args, selector)
        else:
            td = losses.q_learning(*args)
        loss = _td_loss(td, self.grad_error_bound)
        loss = loss + _cql(self.cql_alpha, out_tm1.q_values, batch.a_tm1)
        return LossOutput(loss, td.detach().abs(), _q_taken(out_tm1, batch.a_tm1))


class EnsembleQLearning:
    """Ensemble-DQN (Agarwal, Schuurmans & Norouzi 2020, arXiv:1907.04543): every head
    of a multi-head network learns its own Q-function from the same minibatch, with
    its own target r + discount max_a Q^target_k(s_t, a) (batch_rl's IDENTITY transform).

    The loss is `_td_loss` per (example, head), averaged over heads (batch_rl: over the
    batch, then over heads; the same number with equal weights). Priorities are the
    heads' mean |TD error|; CQL's term is each head's, averaged likewise.
    """

    def __init__(self, double_q=False, grad_error_bound=0.0, cql_alpha=0.0):
        self.double_q, self.grad_error_bound = double_q, grad_error_bound
        self.cql_alpha = cql_alpha

    def __call__(self, online: nn.Module, target: nn.Module, batch: Any,
                 generator: Any) -> LossOutput:  # fmt: skip
        out_tm1, q_t, selector = _forward(online, target, batch, generator, "q_heads",
                                          "q_heads", self.double_q)  # fmt: skip
        td = losses.multi_head_q_learning(
            out_tm1.q_heads, batch.a_tm1, batch.r_t, batch.discount_t, q_t, selector
        )  # [B, K]
        # The mean over K heads scales each head's gradient by 1 / K before the clip
        # sees it: a bound / K keeps DQN Zoo's clip for every head.
        loss = _td_loss(td, self.grad_error_bound / td.shape[1])
        loss = loss + _cql(self.cql_alpha, out_tm1.q_heads, batch.a_tm1)
        return LossOutput(loss.mean(1), td.detach().abs().mean(1), _q_taken(out_tm1, batch.a_tm1))


class REMQLearning:
    """Random Ensemble Mixture (Agarwal, Schuurmans & Norouzi 2020, arXiv:1907.04543):
    Q-learning on a random convex combination of the heads, alpha ~ Uniform(0, 1)^K / its
    L1 norm (batch_rl's STOCHASTIC transform).

    ONE fresh alpha per minibatch, drawn from the learner's generator and shared by the
    online and the target heads (and the double-Q selector): batch_rl's single TF random
    op, re-evaluated once per training step. The loss is `_td_loss` of the mixture's TD
    error, priorities its |TD error|, CQL's term on the mixed online Q-values. Acting
    and evaluation use the heads' plain mean (the network's q_values), not a mixture.
    """

    def __init__(self, num_heads, double_q=False, grad_error_bound=0.0, cql_alpha=0.0):
        self.num_heads, self.double_q = num_heads, double_q
        self.grad_error_bound, self.cql_alpha = grad_error_bound, cql_alpha

    def __call__(self, online: nn.Module, target: nn.Module, batch: Any,
                 generator: Any) -> LossOutput:  # fmt: skip
        device = batch.s_tm1.device
        alpha = random_convex_combination(self.num_heads, generator=generator, device=device)
        out_tm1, q_t, selector = _forward(online, target, batch, generator, "q_heads",
                                          "q_heads", self.double_q)  # fmt: skip
        td = losses.rem_q_learning(
            out_tm1.q_heads, batch.a_tm1, batch.r_t, batch.discount_t, q_t, alpha, selector
        )
        loss = _td_loss(td, self.grad_error_bound)
        loss = loss + _cql(self.cql_alpha, mix_heads(out_tm1.q_heads, alpha), batch.a_tm1)
        return LossOutput(loss, td.detach().abs(), _q_taken(out_tm1, batch.a_tm1))


class CategoricalQLearning:
    """C51 (Bellemare et al. 2017): cross-entropy to the projected target
    distribution; with `double_q`, Rainbow's (Hessel et al. 2018) online selector.
    Priorities are the loss, clipped to [0, 100] (DQN Zoo). CQL acts on the mean
    Q-values sum_i z_i p_i, with their gradient (as Dopamine's labs/offline_rl)."""

    def __init__(self, double_q=False, cql_alpha=0.0):
        self.double_q, self.cql_alpha = double_q, cql_alpha

    def __call__(self, online: nn.Module, target: nn.Module, batch: Any,
                 generator: Any) -> LossOutput:  # fmt: skip
        atoms = cast(torch.Tensor, online.support)  # a buffer of the network
        out_tm1, logits_t, selector = _forward(online, target, batch, generator, "q_logits",
                                               "q_values", self.double_q)  # fmt: skip
        args = (atoms, out_tm1.q_logits, batch.a_tm1, batch.r_t, batch.discount_t, atoms, logits_t)
        if self.double_q:
            loss = losses.categorical_double_q_learning(*args, selector)
        else:
            loss = losses.categorical_q_learning(*args)
        cql = 0.0
        if self.cql_alpha > 0:  # the network's q_values carry no gradient (DQN Zoo)
            q_tm1 = (torch.softmax(out_tm1.q_logits, -1) * atoms).sum(-1)
            cql = _cql(self.cql_alpha, q_tm1, batch.a_tm1)
        return _distributional_output(loss, out_tm1, batch.a_tm1, cql)


class QuantileQLearning:
    """QR-DQN (Dabney et al. 2018, arXiv:1710.10044): quantile Huber regression onto
    the target's quantiles at fixed midpoints tau_i = (2i + 1) / 2N. The greedy action
    at s_t comes from the target network, or the online one with `double_q`. CQL acts
    on the mean over quantiles, with its gradient (Kumar et al. 2020's QR-DQN variant)."""

    def __init__(self, num_quantiles, huber_param, double_q=False, cql_alpha=0.0):
        self.num_quantiles, self.huber_param, self.double_q = num_quantiles, huber_param, double_q
        self.cql_alpha = cql_alpha

    def __call__(self, online: nn.Module, target: nn.Module, batch: Any,
                 generator: Any) -> LossOutput:  # fmt: skip
        n = self.num_quantiles
        out_tm1 = online(batch.s_tm1, generator=generator)
        with torch.no_grad():
            dist_t = target_at_s_t(target, batch, generator).q_dist
            selector = online(batch.s_t, generator=generator).q_dist if self.double_q else dist_t
        taus = (torch.arange(n, device=dist_t.device) + 0.5) / n
        tau_tm1 = taus.expand(len(batch.a_tm1), n)
        loss = losses.quantile_q_learning(
            out_tm1.q_dist, tau_tm1, batch.a_tm1, batch.r_t, batch.discount_t, selector, dist_t,
            self.huber_param,
        )  # fmt: skip
        cql = _cql(self.cql_alpha, out_tm1.q_dist.mean(1), batch.a_tm1)
        return _distributional_output(loss, out_tm1, batch.a_tm1, cql)


class ImplicitQuantileQLearning:
    """IQN (Dabney et al. 2018, arXiv:1806.06923): quantile Huber regression at
    sampled taus, N for the online distribution and N' for the target's; the greedy
    action at s_t averages K further samples from the target network (or the online
    one with `double_q`). CQL acts on the mean over the N online taus."""

    def __init__(self, num_tm1, num_t, num_policy, huber_param, double_q=False, cql_alpha=0.0):
        self.num_tm1, self.num_t, self.num_policy = num_tm1, num_t, num_policy
        self.huber_param, self.double_q, self.cql_alpha = huber_param, double_q, cql_alpha

    def __call__(self, online: nn.Module, target: nn.Module, batch: Any,
                 generator: Any) -> LossOutput:  # fmt: skip
        size, device = len(batch.a_tm1), batch.s_tm1.device

        def taus(n):
            return uniform((size, n), generator, device)

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
        cql = _cql(self.cql_alpha, out_tm1.q_dist.mean(1), batch.a_tm1)
        return _distributional_output(loss, out_tm1, batch.a_tm1, cql)


class R2D1SequenceLearning:
    """R2D1 (Kapturowski et al. 2019, ICLR; rlpyt's R2D1.loss, B3.3) on a `SequenceBatch`
    (replay/sequences.py) of B sequences of W burn-in + T trained + n steps:

    1. burn-in, no gradient: the online and the target network each run over steps
       [0, W) from the stored state; where an episode began inside them, both end
       states are zeroed (B3.3 step 4);
    2. the online network runs over the trained steps [W, W + T) with gradient;
    3. no gradient: the target network runs over [W, W + T + n) from its own state,
       and with double Q the online one continues over the last n steps, so that the
       bootstrap Q at each n-step target's row (gamma^k, qzoo's n-step returns) is
       valued by the target and chosen by the online network;
    4. delta = h(R + discount h^-1(Q_target)) - Q (losses.transformed_n_step_q_learning),
       loss 1/2 delta^2 (rlpyt's delta_clip None), counted only up to each sequence's
       episode end (losses.valid_until_episode_end, step 8).

    Per-sequence losses are scaled so that the learner's (importance-weighted) mean over
    sequences is rlpyt's valid-weighted mean over all B x T steps; priorities are
    eta max + (1 - eta) mean of the valid |delta| (step 9).
    """

    def __init__(self, burn_in, double_q, eps, eta):
        self.burn_in, self.double_q, self.eps, self.eta = burn_in, double_q, eps, eta

    def __call__(self, online: nn.Module, target: nn.Module, batch: Any,
                 generator: Any) -> LossOutput:  # fmt: skip
        from qzoo.replay.sequences import stacked_observations

        w, steps = self.burn_in, batch.action.shape[0]
        obs = stacked_observations(batch.frames, batch.frame_mask)
        prev_a, prev_r = batch.prev_action, batch.prev_reward
        stored = (batch.state[..., 0, :].contiguous(), batch.state[..., 1, :].contiguous())
        with torch.no_grad():
            online_state = target_state = stored
            if w > 0:
                keep = (~batch.zero_state).float()[None, :, None]
                online_state = online(obs[:w], prev_a[:w], prev_r[:w], stored)[1]
                target_state = target(obs[:w], prev_a[:w], prev_r[:w], stored)[1]
                online_state = tuple(x * keep for x in online_state)
                target_state = tuple(x * keep for x in target_state)
        trained = slice(w, w + steps)
        q_tm1, end_state = online(obs[trained], prev_a[trained], prev_r[trained], online_state)
        with torch.no_grad():
            q_target = target(obs[w:], prev_a[w:], prev_r[w:], target_state)[0]  # [T + n, B, A]
            index = batch.bootstrap[..., None].expand(-1, -1, q_target.shape[-1])
            q_t = q_target.gather(0, index)
            selector = None
            if self.double_q:
                tail = slice(w + steps, None)
                end_state = tuple(x.detach() for x in end_state)
                q_tail = online(obs[tail], prev_a[tail], prev_r[tail], end_state)[0]
                selector = torch.cat([q_tm1.detach(), q_tail]).gather(0, index)
        td = losses.transformed_n_step_q_learning(
            q_tm1, batch.action, batch.r_t, batch.discount_t, q_t, selector, self.eps
        )
        valid = losses.valid_until_episode_end(batch.transition, dim=0)  # [T, B]
        per_step = losses.l2_loss(td) * valid
        # sum_b w_b loss_b / B = sum_{t,b} w_b valid l / sum valid: rlpyt's valid mean.
        loss = per_step.sum(0) * (valid.shape[1] / valid.sum().clamp(min=1))
        priorities = losses.sequence_priorities(td.detach().abs(), valid, self.eta, dim=0)
        q_taken = q_tm1.detach().gather(-1, batch.action[..., None]).squeeze(-1)
        mean_q = (q_taken * valid).sum(0) / valid.sum(0).clamp(min=1)
        return LossOutput(loss, priorities, mean_q)


class QRegression:
    """Q(s_tm1, a_tm1) regressed on returns made beforehand (`batch.g_t`, a ReturnBatch):
    PQN's loss on its rollout's Q(lambda) returns (Gallici et al. 2025), `l2` = 0.5 x^2
    (purejaxql) or `squared` = x^2 (CleanRL's mse_loss). No target network: the returns
    came from the network that acted. Priorities |G - Q|."""

    def __init__(self, loss="l2"):
        self.loss = loss

    def __call__(self, online: nn.Module, target: nn.Module, batch: Any,
                 generator: Any) -> LossOutput:  # fmt: skip
        q_tm1 = _q_taken(online(batch.s_tm1, generator=generator), batch.a_tm1)
        td = batch.g_t - q_tm1
        loss = losses.l2_loss(td) if self.loss == "l2" else td.square()
        return LossOutput(loss, td.detach().abs(), q_tm1)
