"""A Gymnasium environment of one's own, for qzoo's examples: a corridor of LENGTH
cells, the agent starting at the left end; action 1 steps right, 0 steps left; reaching
the right end gives +1 and ends the episode, every other step costs 0.01. Observations
are the one-hot position (float32). The best return is 1 - 0.01 (LENGTH - 2).

Importing this module registers it as Corridor-v0 (episodes truncated at 50 steps), so
that qzoo finds it by name everywhere:

    qzoo train dqn --env corridor:Corridor-v0          # Gymnasium's module:EnvId
    qzoo train dqn --gym-packages corridor --env Corridor-v0
    qzoo.train("dqn", env=corridor.Corridor)           # from Python: a class or function
"""

import gymnasium
import numpy as np

LENGTH = 8


class Corridor(gymnasium.Env):
    def __init__(self, length: int = LENGTH):
        self.length = length
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (length,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.position = 0

    def _observation(self):
        one_hot = np.zeros(self.length, np.float32)
        one_hot[self.position] = 1.0
        return one_hot

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = 0
        return self._observation(), {}

    def step(self, action):
        self.position = max(0, self.position + (1 if int(action) == 1 else -1))
        terminated = self.position == self.length - 1
        reward = 1.0 if terminated else -0.01
        return self._observation(), reward, terminated, False, {}


gymnasium.register("Corridor-v0", entry_point=Corridor, max_episode_steps=50)
