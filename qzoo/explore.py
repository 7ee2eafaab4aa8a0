"""Exploration: DQN Zoo's LinearSchedule and epsilon-greedy action selection."""

import numpy as np


class LinearSchedule:
    """Constant `begin_value` until `begin_t`, then linear to `end_value` over
    `decay_steps`, then constant (DQN Zoo parts.LinearSchedule)."""

    def __init__(self, begin_t, decay_steps, begin_value, end_value):
        self.begin_t, self.decay_steps = begin_t, max(1, decay_steps)
        self.begin_value, self.end_value = begin_value, end_value

    def __call__(self, t):
        fraction = min(max(t - self.begin_t, 0) / self.decay_steps, 1.0)
        return self.begin_value + fraction * (self.end_value - self.begin_value)


def epsilon_greedy(q_values, epsilon, random_state):
    """Epsilon-greedy over rows of `q_values` [N, A] (numpy); ties broken uniformly.

    With probability epsilon the action is uniform over all actions (which may be
    the greedy one), as in distrax.EpsilonGreedy. `epsilon` is a scalar or [N].
    """
    n, num_actions = q_values.shape
    is_max = q_values == q_values.max(axis=1, keepdims=True)
    # Uniform among the maxima: argmax of random keys restricted to the maxima.
    keys = random_state.random_sample((n, num_actions)) + is_max
    greedy = keys.argmax(axis=1)
    explore = random_state.random_sample(n) < epsilon
    return np.where(explore, random_state.randint(num_actions, size=n), greedy)
