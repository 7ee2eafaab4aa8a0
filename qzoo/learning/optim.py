"""Optimizers with DQN Zoo's exact semantics (Optax at DQN Zoo's pinned versions), and
with Dopamine's (TF1's `tf.compat.v1.train` optimizers, which batch_rl's agents use).

Where the two differ:
- RMSProp: both put epsilon inside the square root, but TF1 starts the mean-square
  accumulator at 1 (Optax: 0), so its first few hundred updates (decay 0.95) are damped.
- Adam: Optax (and PyTorch) add epsilon to the bias-corrected root, sqrt(v / (1 -
  beta2^t)) + eps; TF1 adds it to the raw root ("epsilon hat", Kingma & Ba 2015, before
  section 2.1), which is PyTorch's eps = eps_hat / sqrt(1 - beta2^t): up to 32x larger
  over the first thousand updates, then equal.
"""

import math

import torch


class CenteredRMSProp(torch.optim.Optimizer):
    """optax.rmsprop(centered=True): eps INSIDE the square root, no momentum.

    nu <- decay nu + (1 - decay) g^2;  mu <- decay mu + (1 - decay) g
    theta <- theta - lr g / sqrt(nu - mu^2 + eps), accumulators start at 0.
    (Graves 2013, arXiv:1308.0850; used by Mnih et al. 2015.) PyTorch's
    RMSprop(centered=True) adds eps outside the root, which is a different update.
    """

    def __init__(self, params, lr, decay=0.95, eps=1e-6, initial_nu=0.0):
        """`initial_nu` 1 gives TF1's RMSPropOptimizer (Dopamine), whose mean-square
        slot starts at ones; its mean-gradient slot starts at 0 as here."""
        super().__init__(params, {"lr": lr, "decay": decay, "eps": eps, "initial_nu": initial_nu})

    @torch.no_grad()
    def step(self):
        # One foreach operation over all parameters per line: the same float32
        # arithmetic, element by element, as one operation per parameter (so the
        # same results), with a fraction of the Python and dispatch overhead for
        # DQN's 10 tensors (it dominates for small networks).
        for group in self.param_groups:
            lr, decay, eps = group["lr"], group["decay"], group["eps"]
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            for p in params:
                if not self.state[p]:
                    self.state[p]["nu"] = torch.full_like(p, group.get("initial_nu", 0.0))
                    self.state[p]["mu"] = torch.zeros_like(p)
            nu = [self.state[p]["nu"] for p in params]
            mu = [self.state[p]["mu"] for p in params]
            centered_rmsprop_(params, [p.grad for p in params], nu, mu, lr, decay, eps)


def centered_rmsprop_(params, grads, nu, mu, lr, decay, eps):
    """Centered RMSProp's step, in place, with epsilon inside the square root (the
    class's docstring): the one implementation, which the optimizer's `step` and the
    compiled and captured updates (`graph_update`) call. One foreach operation over all
    parameters per line: the same float32 arithmetic, element by element, as one
    operation per parameter, with a fraction of the dispatch overhead for DQN's 10
    tensors; torch.compile traces foreach operations too."""
    torch._foreach_mul_(nu, decay)
    torch._foreach_addcmul_(nu, grads, grads, value=1 - decay)
    torch._foreach_mul_(mu, decay)
    torch._foreach_add_(mu, grads, alpha=1 - decay)
    denom = torch._foreach_sub(nu, torch._foreach_mul(mu, mu))  # nu - mu^2
    torch._foreach_add_(denom, eps)
    torch._foreach_sqrt_(denom)
    torch._foreach_addcdiv_(params, grads, denom, value=-lr)


class AdamTF1(torch.optim.Adam):
    """TF1's AdamOptimizer (Dopamine's Adam): epsilon hat, added to sqrt(v) before
    the bias correction, theta -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps).

    PyTorch's Adam computes lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps'),
    which is the same update for eps' = eps / sqrt(1 - b2^t); this sets eps' before each
    step from the step count in the optimizer's state (so a resumed run continues it),
    keeping PyTorch's fused kernel (see from_config.py's `make_optimizer`).
    """

    def __init__(self, params, lr, eps, fused=True):
        super().__init__(params, lr=lr, eps=eps, fused=fused)
        for group in self.param_groups:
            group["eps_hat"] = eps

    def step(self, closure=None):
        for group in self.param_groups:
            done = (int(self.state[p]["step"]) for p in group["params"] if "step" in self.state[p])
            t = next(done, 0) + 1
            group["eps"] = group["eps_hat"] / math.sqrt(1 - group["betas"][1] ** t)
        return super().step(closure)


def clip_by_global_norm_(parameters, max_norm):
    """optax.clip_by_global_norm: scale by max_norm/||g|| when ||g|| > max_norm.

    Unlike torch.nn.utils.clip_grad_norm_ no 1e-6 is added to the norm. Returns the
    pre-clip norm.
    """
    return clip_grads_by_global_norm_([p.grad for p in parameters if p.grad is not None], max_norm)


def clip_grads_by_global_norm_(grads, max_norm):
    """`clip_by_global_norm_` on a list of gradient tensors (in place)."""
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    if max_norm > 0:
        scale = torch.where(norm > max_norm, max_norm / norm, torch.ones_like(norm))
        for g in grads:
            g.mul_(scale)
    return norm


# ---- The same updates as tensor operations only, for a compiled update (compiled.py) --


def graph_state(optimizer):
    """Each parameter's optimizer state (dicts of tensors, in `params` order), created
    as `optimizer.step()` would create it where it is missing, so that a compiled update
    (`graph_update`) and the eager optimizer share one state and one checkpoint."""
    group = optimizer.param_groups[0]
    states = []
    for p in group["params"]:
        state = optimizer.state[p]
        if not state:
            if isinstance(optimizer, CenteredRMSProp):
                state["nu"] = torch.full_like(p, group["initial_nu"])
                state["mu"] = torch.zeros_like(p)
            else:  # torch's Adam with fused=True keeps its step count on the device
                state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        states.append(state)
    return states


def graph_update(optimizer, max_global_grad_norm):
    """`update_(params, grads, states)`: global-norm clipping (when > 0) and
    `optimizer`'s step, in place, with no Python read of a tensor (so it can run inside
    a compiled graph; the hyperparameters are fixed here). Centered RMSProp is the
    eager optimizer's own function (`centered_rmsprop_`). Adam is `adam_`: the eager
    optimizer runs PyTorch's fused kernel instead, which torch.compile cannot trace
    (functionalization refuses its in-place writes: PyTorch 2.13), and which a
    checkpoint's results depend on; `adam_` is PyTorch's arithmetic in another order
    of float32 operations (tests/learning/test_compiled.py holds the two together),
    with TF1's epsilon hat for `AdamTF1`."""
    group = optimizer.param_groups[0]
    lr = group["lr"]

    def clip_(grads):
        if max_global_grad_norm > 0:
            clip_grads_by_global_norm_(grads, max_global_grad_norm)

    if isinstance(optimizer, CenteredRMSProp):
        decay, eps = group["decay"], group["eps"]

        def update_(params, grads, states):
            clip_(grads)
            nu, mu = [state["nu"] for state in states], [state["mu"] for state in states]
            centered_rmsprop_(params, grads, nu, mu, lr, decay, eps)

        return update_
    beta1, beta2 = group["betas"]
    eps = group["eps_hat"] if isinstance(optimizer, AdamTF1) else group["eps"]
    tf1 = isinstance(optimizer, AdamTF1)

    def update_(params, grads, states):
        clip_(grads)
        adam_(params, grads, states, lr, beta1, beta2, eps, tf1)

    return update_


def adam_(params, grads, states, lr, beta1, beta2, eps, tf1=False):
    """Adam's step (Kingma & Ba 2015), in place, as tensor operations only: each
    state's step count, first and second moments (torch's Adam's state, so one
    checkpoint). `tf1`: `eps` is TF1's epsilon hat, added to the raw root."""
    for p, g, state in zip(params, grads, states):
        step = state["step"]
        step.add_(1)
        state["exp_avg"].lerp_(g, 1 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
        root_correction = (1 - beta2**step).sqrt()
        # TF1 adds epsilon hat to the raw root: PyTorch's eps = eps_hat / sqrt(1 - b2^t).
        epsilon = eps / root_correction if tf1 else eps
        denom = state["exp_avg_sq"].sqrt() / root_correction + epsilon
        p.sub_(lr / (1 - beta1**step) * state["exp_avg"] / denom)
