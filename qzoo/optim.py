"""Optimizers with DQN Zoo's exact semantics (Optax at DQN Zoo's pinned versions)."""

import torch


class CenteredRMSProp(torch.optim.Optimizer):
    """optax.rmsprop(centered=True): eps INSIDE the square root, no momentum.

    nu <- decay nu + (1 - decay) g^2;  mu <- decay mu + (1 - decay) g
    theta <- theta - lr g / sqrt(nu - mu^2 + eps), accumulators start at 0.
    (Graves 2013, arXiv:1308.0850; used by Mnih et al. 2015.) PyTorch's
    RMSprop(centered=True) adds eps outside the root, which is a different update.
    """

    def __init__(self, params, lr, decay=0.95, eps=1e-6):
        super().__init__(params, {"lr": lr, "decay": decay, "eps": eps})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, decay, eps = group["lr"], group["decay"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["nu"] = torch.zeros_like(p)
                    state["mu"] = torch.zeros_like(p)
                nu, mu, g = state["nu"], state["mu"], p.grad
                nu.mul_(decay).addcmul_(g, g, value=1 - decay)
                mu.mul_(decay).add_(g, alpha=1 - decay)
                denom = (nu - mu.square()).add_(eps).sqrt_()
                p.addcdiv_(g, denom, value=-lr)


def clip_by_global_norm_(parameters, max_norm):
    """optax.clip_by_global_norm: scale by max_norm/||g|| when ||g|| > max_norm.

    Unlike torch.nn.utils.clip_grad_norm_ no 1e-6 is added to the norm. Returns the
    pre-clip norm.
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    if max_norm > 0:
        scale = torch.where(norm > max_norm, max_norm / norm, torch.ones_like(norm))
        for g in grads:
            g.mul_(scale)
    return norm


def make_optimizer(config, params):
    if config.optimizer == "adam":
        # Optax's adam equals torch's Adam: eps outside the root, bias correction.
        # foreach: one kernel per operation over all tensors (CPU defaults to a loop).
        return torch.optim.Adam(
            params, lr=config.learning_rate, eps=config.optimizer_epsilon, foreach=True
        )
    return CenteredRMSProp(
        params, lr=config.learning_rate, decay=config.rmsprop_decay,
        eps=config.optimizer_epsilon,
    )  # fmt: skip
