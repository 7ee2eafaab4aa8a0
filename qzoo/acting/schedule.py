"""Linear schedules over a counter (DQN Zoo's parts.LinearSchedule): the training
epsilon's decay over frames, prioritized replay's beta over replay additions."""


class LinearSchedule:
    """Constant `begin_value` until `begin_t`, then linear to `end_value` over
    `decay_steps`, then constant (DQN Zoo parts.LinearSchedule)."""

    def __init__(self, begin_t, decay_steps, begin_value, end_value):
        self.begin_t, self.decay_steps = begin_t, max(1, decay_steps)
        self.begin_value, self.end_value = begin_value, end_value

    def __call__(self, t):
        fraction = min(max(t - self.begin_t, 0) / self.decay_steps, 1.0)
        return self.begin_value + fraction * (self.end_value - self.begin_value)


def importance_sampling_schedule(config):
    """Prioritized replay's beta, annealed over replay additions (DQN Zoo)."""
    return LinearSchedule(
        config.min_replay_size, config.importance_sampling_end_t - config.min_replay_size,
        config.importance_sampling_exponent_begin_value,
        config.importance_sampling_exponent_end_value,
    )  # fmt: skip
