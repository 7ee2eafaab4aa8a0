"""Exploration: DQN Zoo's LinearSchedule, epsilon-greedy action selection, and the
per-environment epsilons of rlpyt (log-spaced) and Ape-X."""

import numpy as np
import torch


class LinearSchedule:
    """Constant `begin_value` until `begin_t`, then linear to `end_value` over
    `decay_steps`, then constant (DQN Zoo parts.LinearSchedule)."""

    def __init__(self, begin_t, decay_steps, begin_value, end_value):
        self.begin_t, self.decay_steps = begin_t, max(1, decay_steps)
        self.begin_value, self.end_value = begin_value, end_value

    def __call__(self, t):
        fraction = min(max(t - self.begin_t, 0) / self.decay_steps, 1.0)
        return self.begin_value + fraction * (self.end_value - self.begin_value)


def epsilon_greedy(q_values, epsilon, generator):
    """Epsilon-greedy over rows of `q_values` [N, A] on their device; ties broken
    uniformly at random.

    With probability epsilon[i] row i's action is uniform over all actions (which may
    be the greedy one), as in distrax.EpsilonGreedy. `epsilon` is a tensor [N] (one
    per environment) on the same device; `generator` is the caller's random stream.
    NumPy `q_values` and `epsilon` (a CPU policy's) take the host path below, with the
    same draws and actions.
    """
    if isinstance(q_values, np.ndarray):
        return _epsilon_greedy_host(q_values, epsilon, generator)
    n, num_actions = q_values.shape
    device = q_values.device
    is_max = q_values == q_values.max(dim=1, keepdim=True).values
    # Uniform among the maxima: argmax of random keys in [0, 1) lifted by 1 at maxima.
    keys = torch.rand(n, num_actions, device=device, generator=generator) + is_max
    greedy = keys.argmax(dim=1)
    explore = torch.rand(n, device=device, generator=generator) < epsilon
    uniform = torch.randint(num_actions, (n,), device=device, generator=generator)
    return torch.where(explore, uniform, greedy)


def _epsilon_greedy_host(q_values, epsilon, generator):
    """`epsilon_greedy` for NumPy `q_values` [N, A] and `epsilon` [N] with a CPU
    generator: the same three draws, in the same order and from the same stream, and
    the same float32 arithmetic, so the same actions (numpy int64) as the tensor path.
    A CPU policy acting in one environment spends its time in dispatch, not arithmetic:
    one small PyTorch operation costs a few microseconds, a NumPy one under one
    (BENCHMARKS.md: peers, per-step cost)."""
    n, num_actions = q_values.shape
    is_max = q_values == q_values.max(axis=1, keepdims=True)
    keys = torch.rand(n, num_actions, generator=generator).numpy() + is_max
    explore = torch.rand(n, generator=generator).numpy() < np.asarray(epsilon, np.float32)
    uniform = torch.randint(num_actions, (n,), generator=generator).numpy()
    return np.where(explore, uniform, keys.argmax(axis=1))


def log_spaced_epsilons(eps_final_min, eps_final, num_envs):
    """rlpyt's vector of final epsilons (`make_vec_eps`): environment i of G gets
    eps_final_min * (eps_final / eps_final_min) ** (i / (G - 1)), log-spaced over every
    environment of every actor (global ranks). As `torch.logspace` does, a single
    environment (G = 1) gets `eps_final_min`, not `eps_final`. R2D1's example, min
    0.0005 and final 0.1 over 4 environments: 0.0005, 0.0029, 0.0171, 0.1.
    """
    if num_envs == 1:
        return np.array([eps_final_min], np.float64)
    i = np.arange(num_envs, dtype=np.float64)
    return eps_final_min * (eps_final / eps_final_min) ** (i / (num_envs - 1))


def apex_epsilons(num_actors, epsilon=0.4, alpha=7.0):
    """Ape-X's fixed per-actor epsilons (Horgan et al. 2018, "Distributed Prioritized
    Experience Replay", sec. 4.1): eps_i = epsilon ** (1 + alpha * i / (N - 1)) for
    i = 0..N-1, so actor 0 explores with 0.4 and actor N-1 with 0.4 ** 8 ~ 0.00066.
    One actor (N = 1) gets `epsilon` (the paper's formula divides by N - 1 = 0).
    """
    if num_actors == 1:
        return np.array([epsilon], np.float64)
    i = np.arange(num_actors, dtype=np.float64)
    return epsilon ** (1.0 + alpha * i / (num_actors - 1))
