"""Exploration: DQN Zoo's LinearSchedule and epsilon-greedy action selection."""

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
    """
    n, num_actions = q_values.shape
    device = q_values.device
    is_max = q_values == q_values.max(dim=1, keepdim=True).values
    # Uniform among the maxima: argmax of random keys in [0, 1) lifted by 1 at maxima.
    keys = torch.rand(n, num_actions, device=device, generator=generator) + is_max
    greedy = keys.argmax(dim=1)
    explore = torch.rand(n, device=device, generator=generator) < epsilon
    uniform = torch.randint(num_actions, (n,), device=device, generator=generator)
    return torch.where(explore, uniform, greedy)
