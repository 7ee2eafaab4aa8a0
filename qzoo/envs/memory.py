"""Partially observable tasks for recurrent agents: CartPole with its velocities
masked, registered with Gymnasium as `qzoo/StatelessCartPole-v1` (popgym's
StatelessCartPole, Morad et al. 2023, arXiv:2303.01859, without the package).

The observation keeps the cart position and the pole angle and drops both velocities,
so one observation cannot tell which way the pole is moving: a feed-forward agent with
--frame-stack 1 can only react to the angle, while a recurrent one can infer the
velocities from its history (R2D1's memory task, tests/learning/test_r2d1_learning.py).
"""

import gymnasium
import numpy as np
from gymnasium import spaces

STATELESS_CARTPOLE = "qzoo/StatelessCartPole-v1"


class MaskVelocities(gymnasium.ObservationWrapper):
    """CartPole's (x, x_dot, theta, theta_dot) -> (x, theta)."""

    KEEP = (0, 2)

    def __init__(self, env):
        super().__init__(env)
        box = env.observation_space
        self.observation_space = spaces.Box(box.low[list(self.KEEP)], box.high[list(self.KEEP)],
                                            dtype=np.float32)  # fmt: skip

    def observation(self, observation):
        return observation[list(self.KEEP)].astype(np.float32)


def _make_stateless_cartpole(**kwargs):
    return MaskVelocities(gymnasium.make("CartPole-v1", **kwargs))


if STATELESS_CARTPOLE not in gymnasium.registry:
    gymnasium.register(STATELESS_CARTPOLE, entry_point=_make_stateless_cartpole)
