"""The learning side of a run from its config: the objective a preset names, the
optimizer, and the learner (compiled with --compile). The one module of learning/ that
reads a Config: the learner, objectives, losses and optimizers take typed arguments."""

from collections.abc import Callable
from typing import Any

import torch

from qzoo.learning.augmentation import Augmented
from qzoo.learning.learner import Learner
from qzoo.learning.objectives import (
    CategoricalQLearning,
    EnsembleQLearning,
    ImplicitQuantileQLearning,
    Objective,
    QLearning,
    QRegression,
    QuantileQLearning,
    R2D1SequenceLearning,
    REMQLearning,
)
from qzoo.learning.optim import AdamTF1, CenteredRMSProp
from qzoo.networks.network import make_network


def objective_key(config):
    """(distribution, head mixing): the mixing only counts with several heads, since
    one head mixed either way is that head (None then). R2D1's recurrent network has
    its own: ("recurrent", None); PQN's rollouts too: ("returns", None)."""
    if config.recurrent:
        return "recurrent", None
    if config.rollout_steps:
        return "returns", None
    return config.distribution, config.head_mixing if config.num_heads > 1 else None


# (distribution, head mixing) -> its objective, built from the config.
OBJECTIVES: dict[tuple[str, str | None], Callable[[Any], Objective]] = {
    ("none", None): lambda c: QLearning(c.double_q, c.grad_error_bound, c.cql_alpha),
    ("categorical", None): lambda c: CategoricalQLearning(c.double_q, c.cql_alpha),
    ("quantile", None): lambda c: QuantileQLearning(
        c.num_quantiles, c.huber_param, c.double_q, c.cql_alpha
    ),
    ("implicit_quantile", None): lambda c: ImplicitQuantileQLearning(
        c.tau_samples_s_tm1,
        c.tau_samples_s_t,
        c.tau_samples_policy,
        c.huber_param,
        c.double_q,
        c.cql_alpha,
    ),
    ("none", "identity"): lambda c: EnsembleQLearning(c.double_q, c.grad_error_bound, c.cql_alpha),
    ("none", "stochastic"): lambda c: REMQLearning(
        c.num_heads, c.double_q, c.grad_error_bound, c.cql_alpha
    ),
    ("recurrent", None): lambda c: R2D1SequenceLearning(
        c.burn_in_steps, c.double_q, c.value_rescale_eps, c.priority_eta
    ),
    ("returns", None): lambda c: QRegression(c.return_loss),
}


def make_objective(config):
    """The objective for `config` (see objective_key); an unknown combination is an
    error, never a fallback."""
    key = objective_key(config)
    if key not in OBJECTIVES:
        raise ValueError(
            f"no objective for distribution {key[0]!r} with head mixing {key[1]!r}; expected "
            f"one of {', '.join(f'{d}/{m}' for d, m in OBJECTIVES)}"
        )
    return OBJECTIVES[key](config)


def make_optimizer(config, params):
    """The optimizer --optimizer names over `params` (learning/optim.py)."""
    if config.optimizer == "radam":  # PQN's (Liu et al. 2020): optax's and torch's agree
        return torch.optim.RAdam(params, lr=config.learning_rate, eps=config.optimizer_epsilon)
    if config.optimizer == "adam_tf1":
        return AdamTF1(params, lr=config.learning_rate, eps=config.optimizer_epsilon)
    if config.optimizer == "adam":
        # Optax's adam equals torch's Adam: eps outside the root, bias correction.
        # fused: one pass over each tensor for the whole update (CPU and CUDA), where
        # foreach makes six. Its float32 arithmetic is ordered differently, so results
        # differ from foreach's in the last bits; runs stay deterministic and resume
        # identically.
        return torch.optim.Adam(
            params, lr=config.learning_rate, eps=config.optimizer_epsilon, fused=True
        )
    # rmsprop_centered (Optax) or rmsprop_centered_tf1 (Dopamine's TF1 optimizer, whose
    # epsilon is also inside the root: the same eps maps one to one).
    return CenteredRMSProp(
        params, lr=config.learning_rate, decay=config.rmsprop_decay,
        eps=config.optimizer_epsilon,
        initial_nu=1.0 if config.optimizer == "rmsprop_centered_tf1" else 0.0,
    )  # fmt: skip


def make_learner(config, info, observation_shape, device, generator) -> Learner:
    """The learner of `config` for an environment `info` describes: its network on
    `device`, the objective and the optimizer; with --compile the compiled learner
    (compiled.py). `generator`: the learner's random stream."""
    online = make_network(config, info, observation_shape).to(torch.device(device))
    objective = make_objective(config)
    if config.augmentation != "none":  # DrQ: the learner's batches shifted first
        objective = Augmented(objective, config.augmentation, config.shift_offsets)
    if config.prefetch_targets:  # async: targets at s_t computed a batch ahead
        from qzoo.learning.prefetched import PrefetchedTargets

        objective = PrefetchedTargets(objective)
    optimizer = make_optimizer(config, list(online.parameters()))
    learner_class = Learner
    if config.compile:
        from qzoo.learning.compiled import CompiledLearner

        learner_class = CompiledLearner
    return learner_class(online, objective, optimizer, generator,
                         config.max_global_grad_norm, config.precision)  # fmt: skip
