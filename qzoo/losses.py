"""TD losses as pure functions over batched tensors (after rlax, batched on dim 0).

`discount_t` already contains gamma (and is 0 at terminations and life losses),
as in DQN Zoo. Each function returns per-example values; callers average.
"""

import torch


class _ClipGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, low, high):
        ctx.bounds = (low, high)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        low, high = ctx.bounds
        return grad.clamp(low, high), None, None


def clip_gradient(x, low, high):
    """Identity forward; clips the incoming gradient to [low, high] (rlax).

    With `l2_loss` averaged over a batch of 32 and bounds +-1/32 this is the error
    clipping of Mnih et al. 2015 (equal to a Huber loss with kappa 1).
    """
    return _ClipGradient.apply(x, low, high)


def l2_loss(x):
    """0.5 * x^2, element-wise (rlax.l2_loss)."""
    return 0.5 * x.square()


def huber_loss(x, delta=1.0):
    """0.5 x^2 for |x| <= delta, else delta * (|x| - 0.5 delta) (rlax.huber_loss)."""
    abs_x = x.abs()
    quadratic = abs_x.clamp(max=delta)
    return 0.5 * quadratic.square() + delta * (abs_x - quadratic)


def _action_values(q, a):
    return q.gather(1, a.long().unsqueeze(1)).squeeze(1)


def q_learning(q_tm1, a_tm1, r_t, discount_t, q_t):
    """TD error of Q-learning (Watkins 1989; Mnih et al. 2015).

    delta = r_t + discount_t * max_a q_t[a] - q_tm1[a_tm1]; the target carries no
    gradient. Shapes: q_* [B, A], a_tm1 [B], r_t and discount_t [B]. Returns [B].
    """
    target = r_t + discount_t * q_t.max(dim=1).values
    return target.detach() - _action_values(q_tm1, a_tm1)


def double_q_learning(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector):
    """TD error of double Q-learning (van Hasselt et al. 2016, arXiv:1509.06461).

    The greedy action at s_t comes from `q_t_selector` (online network) and is
    valued by `q_t_value` (target network). Returns [B].
    """
    best = q_t_selector.argmax(dim=1)
    target = r_t + discount_t * _action_values(q_t_value, best)
    return target.detach() - _action_values(q_tm1, a_tm1)
